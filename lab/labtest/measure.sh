#!/bin/sh
# Runs inside the lab VM (lab_test.go copies it into --in with pingpong):
# for each halted state of the emulated driver, enables only that state on
# every CPU, then measures task wake-ups (pingpong across CPUs 0 and 1) and IO
# completions (fio, O_DIRECT 4 KiB reads at queue depth 1 on /data, pinned to
# CPU 1), and writes one line per state to /out/results.txt:
#   state=I name=N yield=Y latency_ns=L usage=U above=A rtt_p50_ns=.. rtt_mean_ns=.. clat_p50_ns=.. clat_mean_ns=.. paid=P spun_ns=S
# usage/above: the state's cpuidle counters over the phase (every CPU), paid
# and spun_ns: idle_emu's own account of the stays it held back and how long.
ROUNDS=${ROUNDS:-2000}
YIELDS=${YIELDS:-0} # idle_emu spin_yield values to measure each state with
FIO_RUNTIME=${FIO_RUNTIME:-4}
set -e
cd "$(dirname "$0")"
sysc=/sys/devices/system/cpu
n=$(ls -d $sysc/cpu0/cpuidle/state* | wc -l)

only() {
	for d in $sysc/cpu[0-9]*/cpuidle/state*; do
		if [ "${d##*state}" = "$1" ]; then echo 0 >"$d/disable"; else echo 1 >"$d/disable"; fi
	done
}
sum() { # sum FILE over every CPU for state $1
	t=0
	for f in $sysc/cpu[0-9]*/cpuidle/state$1/$2; do t=$((t + $(cat "$f"))); done
	echo $t
}
emu() { # emu STATE COLUMN: idle_emu's stats (2 latency_ns 3 paid_at_irq 4 paid_in_enter 5 spun_ns 6 late 7 max_ns)
	awk -v s="$1" -v c="$2" '$1 == s { print $c }' /sys/module/idle_emu/parameters/stats
}
json_ns() { # json_ns FILE KEY: the first "KEY" : number in fio's JSON
	sed -n "s/^ *\"$2\" : \([0-9.]*\).*/\1/p" "$1" | head -1 | cut -d. -f1
}

# IO on lab.sh's fixed-latency null disk when there is one (every completion
# then finds its CPU idle), else on a file in /data.
if [ -e /dev/lab-null ]; then
	iofile=/dev/lab-null
else
	iofile=/data/f
	fio --name=layout --filename=/data/f --size=64M --rw=write --bs=1M --direct=1 >/dev/null
fi
: >/out/results.txt
for y in $YIELDS; do
echo "$y" >/sys/module/idle_emu/parameters/spin_yield
i=0
while [ $i -lt "$n" ]; do
	if [ "$(cat $sysc/cpu0/cpuidle/state$i/name)" = POLL ]; then
		i=$((i + 1))
		continue
	fi
	only $i
	name=$(cat $sysc/cpu0/cpuidle/state$i/name)
	lat=$(emu $i 2)
	u0=$(sum $i usage) a0=$(sum $i above) p0=$(($(emu $i 3) + $(emu $i 4))) s0=$(emu $i 5)
	pp=$(./pingpong -n "$ROUNDS" -cpus 0,1)
	fio --name=clat --filename=$iofile --size=64M --rw=randread --bs=4k --direct=1 \
		--ioengine=psync --iodepth=1 --cpus_allowed=1 --time_based --runtime="$FIO_RUNTIME" \
		--output-format=json --output=/out/fio-$i-$y.json >/dev/null
	u1=$(sum $i usage) a1=$(sum $i above) p1=$(($(emu $i 3) + $(emu $i 4))) s1=$(emu $i 5)
	clat50=$(sed -n '/"clat_ns"/,/}/p' /out/fio-$i-$y.json | sed -n 's/^ *"50.000000" : \([0-9]*\).*/\1/p' | head -1)
	clatmean=$(sed -n '/"clat_ns"/,/"percentile"/p' /out/fio-$i-$y.json | sed -n 's/^ *"mean" : \([0-9]*\).*/\1/p' | head -1)
	rtt50=$(echo "$pp" | sed -n 's/.*rtt_p50_ns=\([0-9]*\).*/\1/p')
	rttmean=$(echo "$pp" | sed -n 's/.*rtt_mean_ns=\([0-9]*\).*/\1/p')
	echo "state=$i name=$name yield=$y latency_ns=$lat usage=$((u1 - u0)) above=$((a1 - a0)) rtt_p50_ns=$rtt50 rtt_mean_ns=$rttmean clat_p50_ns=$clat50 clat_mean_ns=$clatmean paid=$((p1 - p0)) spun_ns=$((s1 - s0))" | tee -a /out/results.txt
	i=$((i + 1))
done
done
cat /sys/module/idle_emu/parameters/stats /sys/module/idle_emu/parameters/calibration >/out/emu.txt
cat /proc/interrupts >/out/interrupts.txt
cat /sys/module/idle_emu/parameters/stats >&2
