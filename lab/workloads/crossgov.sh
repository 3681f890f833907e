#!/bin/sh
# The lab's workload for replaying one governor on another's recording
# (issue 9 item 5). The first-order replay keeps the recorded idle periods
# as they are, so the workload sets their lengths itself, the same under
# any governor: timerload's sleeps on CPU 0 (log-uniform from 1 ms to
# 12 ms, one seed) and the remote wake-ups they send to CPU 1. Each sleep
# is timed from when the thread runs again (-relative 1), not to an
# absolute deadline: under a loaded host the emulator's timer interrupts
# come hundreds of µs late, and a late wake-up then shortened the next
# sleep below C6's 600 µs, so each recording's share of too-shallow stays
# followed that run's lateness (menu 9.1 % against teo 3.7 % below in one
# run; pairs 5.2 points apart) rather than the governor. Gaps start above
# the deepest exit latencies the lab's tables have, so that a deep state's
# slow wake-up does not swallow the next gap. Runs in the lab VM's /work,
# next to a timerload binary (lab/timerload).
exec ./timerload -n 1500 -min 1000 -max 12000 -seed 1 -relative 1
