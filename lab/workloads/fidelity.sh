#!/bin/sh
# The lab's fidelity workload: wake-ups with idle lengths from microseconds
# to milliseconds (a pipe ping-pong between CPUs 0 and 1 with gaps) while
# random 4 KiB reads keep completions coming. Runs in the lab VM's /work,
# next to a pingpong binary (lab/pingpong).
fio --name=r --filename=/data/f --size=32M --rw=randread --bs=4k --direct=1 \
	--ioengine=psync --time_based --runtime=7 --output=/dev/null &
for gap in 0 50us 200us 1ms 3ms; do
	./pingpong -n 400 -gap "$gap" >/dev/null 2>&1
done
wait
