#!/bin/sh
# The lab's workload for replaying one governor on another's recording
# (issue 9 item 5). The first-order replay keeps the recorded idle periods
# as they are, so the workload sets their lengths itself, the same under
# any governor: timerload's absolute deadlines on CPU 0 (log-uniform from
# 1 ms to 12 ms, one seed) and the remote wake-ups they send to CPU 1.
# Gaps start above the deepest exit latencies the lab's tables have, so
# that a deep state's slow wake-up does not swallow the next gap. Runs in
# the lab VM's /work, next to a timerload binary (lab/timerload).
exec ./timerload -n 1500 -min 1000 -max 12000 -seed 1
