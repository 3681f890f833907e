#!/bin/sh
# Runs inside the lab VM (lab_test.go copies it into --in with pingpong):
# measures, for every halted state of the emulated driver, task wake-ups (a
# pipe ping-pong between CPUs 0 and 1: each message's write to the woken
# reader's return on CPU 1; CPU 0, the waker, keeps the shallowest halted
# state throughout: pingpong -waker-state) and IO completions (4 KiB
# O_DIRECT reads at queue depth 1 of lab.sh's fixed-latency null disk on CPU
# 1: each read's system call), with lab/pingpong -states: the states take
# turns of TURN samples, each enabled alone on CPU 1 (on every CPU for the
# reads), until each has ROUNDS round trips and READS reads, so that the
# host's load, which drifts over
# a run, weighs on every state alike. pingpong marks clean the samples during
# which the CPUs woke only for them (no tick, no other wake-up, no
# exit-latency spin that the host held up; see lab/pingpong). Every sample is
# kept: /out/pingpong.txt ("STATE RTT TO_CHILD TO_PARENT CLEAN") and
# /out/io.txt ("STATE LATENCY CLEAN"), ns. One line per state in
# /out/results.txt, each sample set as its count, lower quartile and median:
#   state=I name=N yield=Y latency_ns=L usage=U above=A
#   wake_n= wake_p25_ns= wake_p50_ns= clean_wake_n= clean_wake_p25_ns= clean_wake_p50_ns=
#   io_n= io_p25_ns= io_p50_ns= clean_io_n= clean_io_p25_ns= clean_io_p50_ns=
#   rtt_p50_ns= paid=P spun_ns=S late=K
# usage/above: the state's cpuidle counters over the run (every CPU); paid,
# spun_ns and late: idle_emu's own account of the stays it held back, how
# long, and how many ran more than 10 % over.
ROUNDS=${ROUNDS:-4000}
READS=${READS:-6000}
TURN=${TURN:-25}
YIELD=${YIELD:-} # idle_emu's spin_yield, when set
# ONEWAY=0: both CPUs take the turn's state and both directions are samples.
# Then the waker has itself just left the state, and under TCG the code
# after a long spin runs slower (lab/README.md, 2026-12-03): the wake-up
# carries 5-10 % of the exit latency twice over, once for each CPU.
ONEWAY=${ONEWAY:-1}
# Each read starts after a random busy 0-IO_JITTER: the null disk completes at
# QEMU's main loop's whole-millisecond wake-ups, and without it a read's
# phase against them would follow from the state's exit latency.
IO_JITTER=${IO_JITTER:-1ms}
set -e
cd "$(dirname "$0")"
sysc=/sys/devices/system/cpu
emup=/sys/module/idle_emu/parameters
n=$(ls -d $sysc/cpu0/cpuidle/state* | wc -l)

sum() { # sum STATE FILE over every CPU
	t=0
	for f in $sysc/cpu[0-9]*/cpuidle/state$1/$2; do t=$((t + $(cat "$f"))); done
	echo $t
}
emu() { # emu STATE COLUMN: idle_emu's stats (2 latency_ns 3 paid_at_irq 4 paid_in_enter 5 spun_ns 6 late 7 max_ns)
	awk -v s="$1" -v c="$2" '$1 == s { print $c }' $emup/stats
}
counters() { # counters STATE: usage above paid spun late
	echo "$(sum $1 usage) $(sum $1 above) $(($(emu $1 3) + $(emu $1 4))) $(emu $1 5) $(emu $1 6)"
}
quart() { # quart: count, lower quartile and median of the numbers on stdin (one a line)
	sort -n | awk 'function q(p,  x, i) { x = 1 + p * (NR - 1); i = int(x); return v[i] + (x - i) * (v[i + 1] - v[i]) }
		{ v[NR] = $1 } END { if (NR == 0) { print "0 0 0"; exit }
		v[NR + 1] = v[NR]; printf "%d %.0f %.0f\n", NR, q(0.25), q(0.5) }'
}

[ -e /dev/lab-null ] || { echo "measure.sh: no /dev/lab-null (IDLETRACE_LAB_NULL_LATENCY_NS)" >&2; exit 1; }
[ -z "$YIELD" ] || echo "$YIELD" >$emup/spin_yield
y=$(cat $emup/spin_yield)
states=
i=0
while [ $i -lt "$n" ]; do
	[ "$(cat $sysc/cpu0/cpuidle/state$i/name)" = POLL ] || states="$states${states:+,}$i"
	i=$((i + 1))
done
for i in $(echo "$states" | tr , ' '); do
	eval "c0_$i='$(counters $i)'"
done
waker= wcols='print $3; print $4'
[ "$ONEWAY" != 1 ] || waker="-waker-state ${states%%,*}" wcols='print $3'
./pingpong -n "$ROUNDS" -cpus 0,1 -states "$states" -turn "$TURN" $waker -o /out/pingpong.txt >&2
./pingpong -io /dev/lab-null -io-cpu 1 -n "$READS" -states "$states" -turn "$TURN" -io-jitter "$IO_JITTER" -o /out/io.txt >&2

: >/out/results.txt
for i in $(echo "$states" | tr , ' '); do
	eval "set -- \$c0_$i $(counters $i)"
	u=$(($6 - $1)) a=$(($7 - $2)) p=$(($8 - $3)) s=$(($9 - $4)) l=$((${10} - $5))
	set -- $(awk -v s=$i "\$1 == s { $wcols }" /out/pingpong.txt | quart) \
		$(awk -v s=$i "\$1 == s && \$5 == 1 { $wcols }" /out/pingpong.txt | quart) \
		$(awk -v s=$i '$1 == s { print $2 }' /out/io.txt | quart) \
		$(awk -v s=$i '$1 == s && $3 == 1 { print $2 }' /out/io.txt | quart) \
		$(awk -v s=$i '$1 == s { print $2 }' /out/pingpong.txt | quart)
	echo "state=$i name=$(cat $sysc/cpu0/cpuidle/state$i/name) yield=$y latency_ns=$(emu $i 2) usage=$u above=$a" \
		"wake_n=$1 wake_p25_ns=$2 wake_p50_ns=$3 clean_wake_n=$4 clean_wake_p25_ns=$5 clean_wake_p50_ns=$6" \
		"io_n=$7 io_p25_ns=$8 io_p50_ns=$9 clean_io_n=${10} clean_io_p25_ns=${11} clean_io_p50_ns=${12}" \
		"rtt_p50_ns=${15} paid=$p spun_ns=$s late=$l" | tee -a /out/results.txt
done
cat $emup/stats $emup/overrun $emup/calibration >/out/emu.txt
cat /proc/interrupts >/out/interrupts.txt
cat $emup/stats $emup/overrun >&2
