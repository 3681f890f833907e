#!/usr/bin/env bash
# A small wake-up-heavy workload: 4 KiB O_DIRECT random reads with fio on a
# file, and perf bench sched pipe ping-ponging between CPUs 0 and 1.
# Usage: scripts/workload.sh SECONDS [DIR]
set -eu
secs=${1:-3}
dir=${2:-$(mktemp -d)}
file="$dir/idletrace-workload.dat"
if command -v fio >/dev/null; then
  [ -s "$file" ] || fio --name=layout --filename="$file" --size=64M --rw=write --bs=1M --end_fsync=1 >/dev/null
  fio --name=randread --filename="$file" --size=64M --rw=randread --bs=4k --direct=1 \
      --ioengine=psync --runtime="$secs" --time_based >/dev/null &
else
  # No fio: synchronous small writes still issue block requests.
  ( end=$((SECONDS + secs)); while [ $SECONDS -lt $end ]; do dd if=/dev/zero of="$file" bs=4k count=16 oflag=dsync conv=notrunc 2>/dev/null; done ) &
fi
if command -v perf >/dev/null; then
  timeout "$secs" taskset -c 0,1 perf bench sched pipe -l 100000000 >/dev/null 2>&1 || true
else
  sleep "$secs"
fi
wait
