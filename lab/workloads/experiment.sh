#!/bin/sh
# The lab's workload for predicted-against-measured experiments (issue 10
# item 6): timer-set idle lengths on CPUs 0 and 1 (timerload, as for the
# cross-governor cases: the same under any policy, so the first-order
# replay's periods are the ones the second recording sees), and fio doing
# synchronous 4 KiB reads on CPU 1 from lab.sh's fixed-latency null disk
# (IDLETRACE_LAB_NULL_LATENCY_NS): each read's wait is long enough for the
# deep states, so a policy changes what the reader waits for. fio's own
# parent process (and helper thread) run on CPU 2, with the recorder: it
# stats a missing file about 90 times a second, each freeing a dentry
# through call_rcu, and a CPU with RCU callbacks queued keeps its tick
# (lab/labtest's housekeeping). Runs in the
# lab VM's /work, next to a timerload binary (lab/timerload).
taskset -c 2 fio --name=reader --filename=/dev/lab-null --size=32M --rw=randread --bs=4k --direct=1 \
	--ioengine=psync --time_based --runtime=6 --cpus_allowed=1 --output=/dev/null &
./timerload -n 1000 -min 1000 -max 12000 -seed 1
wait
