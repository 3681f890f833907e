#!/bin/sh
# The lab's workload for what menu and teo learn from a wake-up that is not
# the tick (model review B2), on lab/profiles/c6long.json. timerload's
# thread on CPU 0 busy-waits to each deadline (log-uniform from 1 to 3.5
# ms, one seed) and wakes its reader on CPU 1 through a pipe at every one:
# CPU 1's idle periods end on remote wake-ups between C1E's and C6's target
# residencies and under the 4 ms tick, with no timer of CPU 1's own near,
# so the right state is C1E, and a governor's choice rests on what it
# learnt from the stays before (menu's correction factor, teo's bins) and
# on whether its reflect was told that the tick woke the CPU. No
# governor's exit latency moves the wake-ups: CPU 0's own wake-up is over
# before the deadline. Runs in the lab VM's /work, next to a timerload
# binary (lab/timerload).
exec ./timerload -n 1500 -min 1000 -max 3500 -seed 1 -relative 1 -spin 500
