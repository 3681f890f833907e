#!/bin/sh
# The lab's workload for a PM QoS change during a recording (model review
# B7): fidelity.sh's wake-ups while, from the second to the fifth second,
# a process holds a global latency limit of 2 µs on /dev/cpu_dma_latency
# (an ASCII hex value: the kernel reads any write that is not 4 bytes long
# so). The kernel wakes every idle CPU when the limit changes, and its
# governor keeps to the states whose exit latency fits. Runs in the lab
# VM's /work, next to fidelity.sh and a pingpong binary (lab/pingpong).
(
	sleep 2
	exec 3>/dev/cpu_dma_latency
	printf 2 >&3
	sleep 3
	exec 3>&-
) &
./fidelity.sh
wait
