// SPDX-License-Identifier: GPL-2.0-only
/*
 * timerload: idle periods whose lengths the workload's own timers set, the
 * same under any governor (issue 9 item 5: one governor replayed on
 * another's recording is held to that governor's own recording, and the
 * first-order replay keeps the recorded periods as they are).
 *
 * Thread A, pinned to CPU 0, sleeps to absolute deadlines drawn from a
 * seeded log-uniform sequence (so a slow wake-up delays nothing after it)
 * and at every other deadline wakes thread B, pinned to CPU 1, through a
 * pipe: CPU 1's periods end on remote wake-ups, CPU 0's on its timer.
 * Timer slack is 1 ns, so deadlines are not coalesced.
 *
 * With -relative 1 each sleep is drawn length from when the thread runs
 * again instead: a late wake-up (a host that did not run the vCPU for a
 * while) then does not shorten the next sleep, so the governor sees the
 * same sleep lengths in every run, however late the emulator's timers.
 *
 * With -spin US thread A sleeps to US microseconds before each deadline
 * and busy-waits the rest, and wakes B at every deadline: A's own wake-up,
 * however slow its CPU's idle state or the emulator's timer, is then over
 * before the deadline, so B's idle periods on CPU 1 end on remote wake-ups
 * whose times no governor moves (A's wake-ups from a deep state would
 * otherwise stretch the gaps). A US at least the gap spins throughout.
 *
 *   timerload [-n WAKES] [-min US] [-max US] [-seed N] [-relative 0|1] [-spin US]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
#include <math.h>

static int wakes = 4000;
static double min_us = 20, max_us = 5000;
static uint64_t seed = 1;
static int relative;
static double spin_before_us;
static int pipefd[2];

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("timerload: sched_setaffinity");
		exit(1);
	}
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
}

/* xorshift64*: the same sequence on every run for one seed. */
static double next_uniform(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return (double)((*s * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

static void spin_us(double us)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) / 1e3 < us);
}

static void spin_until(const struct timespec *t)
{
	struct timespec now;
	do
		clock_gettime(CLOCK_MONOTONIC, &now);
	while (now.tv_sec < t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec < t->tv_nsec));
}

static void *waiter(void *arg)
{
	(void)arg;
	pin(1);
	char c;
	while (read(pipefd[0], &c, 1) == 1 && c)
		spin_us(5);
	return NULL;
}

int main(int argc, char **argv)
{
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-n"))
			wakes = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-min"))
			min_us = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "-max"))
			max_us = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "-seed"))
			seed = strtoull(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "-relative"))
			relative = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-spin"))
			spin_before_us = atof(argv[i + 1]);
		else {
			fprintf(stderr, "usage: timerload [-n WAKES] [-min US] [-max US] [-seed N] [-relative 0|1] [-spin US]\n");
			return 2;
		}
	}
	if (wakes <= 0 || min_us <= 0 || max_us < min_us || !seed) {
		fprintf(stderr, "timerload: need -n > 0, 0 < -min <= -max, -seed != 0\n");
		return 2;
	}
	if (pipe(pipefd)) {
		perror("timerload: pipe");
		return 1;
	}
	pthread_t b;
	if (pthread_create(&b, NULL, waiter, NULL)) {
		fprintf(stderr, "timerload: cannot start the waiter\n");
		return 1;
	}
	pin(0);
	uint64_t s = seed;
	double lmin = log(min_us), lmax = log(max_us);
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	for (int i = 0; i < wakes; i++) {
		long ns = (long)(exp(lmin + (lmax - lmin) * next_uniform(&s)) * 1000);
		if (relative)
			clock_gettime(CLOCK_MONOTONIC, &t);
		t.tv_nsec += ns;
		while (t.tv_nsec >= 1000000000L) {
			t.tv_nsec -= 1000000000L;
			t.tv_sec++;
		}
		if (spin_before_us > 0) {
			struct timespec early = t;
			long spin_ns = (long)(spin_before_us * 1000);
			early.tv_sec -= spin_ns / 1000000000L;
			early.tv_nsec -= spin_ns % 1000000000L;
			if (early.tv_nsec < 0) {
				early.tv_nsec += 1000000000L;
				early.tv_sec--;
			}
			while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &early, NULL))
				;
			spin_until(&t);
		} else {
			while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL))
				;
		}
		spin_us(5);
		if (spin_before_us > 0 || (i & 1)) {
			char c = 1;
			if (write(pipefd[1], &c, 1) != 1)
				break;
		}
	}
	char end = 0;
	if (write(pipefd[1], &end, 1) != 1)
		return 1;
	pthread_join(b, NULL);
	return 0;
}
