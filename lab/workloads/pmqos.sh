#!/bin/sh
# The lab's workload for a PM QoS change during a recording (model review
# B7): fidelity.sh's wake-ups (a pipe ping-pong between CPUs 0 and 1 with
# gaps from none to 3 ms, random 4 KiB reads) while, from the second to
# the fifth second, a process holds a global latency limit of 2 µs on
# /dev/cpu_dma_latency (an ASCII hex value: the kernel reads any write
# that is not 4 bytes long so). The kernel wakes every idle CPU when the
# limit changes, and its governor keeps to the states whose exit latency
# fits. Runs in the lab VM's /work, next to a pingpong binary
# (lab/pingpong).
(
	sleep 2
	exec 3>/dev/cpu_dma_latency
	printf 2 >&3
	sleep 3
	exec 3>&-
) &
fio --name=r --filename=/data/f --size=32M --rw=randread --bs=4k --direct=1 \
	--ioengine=psync --time_based --runtime=7 --output=/dev/null &
for gap in 0 50us 200us 1ms 3ms; do
	./pingpong -n 400 -gap "$gap" >/dev/null 2>&1
done
wait
