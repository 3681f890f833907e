#!/usr/bin/env bash
# idletrace against perf record on the same workload, in one run:
#   workload throughput with no tracer, with perf record, with idletrace (ratios),
#   bytes on disk per idle period, BPF run time per event, lost records.
# Then the Go benchmarks of the trace format and the replay.
# Usage: scripts/bench.sh [BIN] (as root). REPS=3 SECS=5 by default.
set -euo pipefail
bin=${1:-bin/idletrace}
reps=${REPS:-3}
secs=${SECS:-5}
[ "$(id -u)" = 0 ] || { echo "bench.sh: needs root (recording)" >&2; exit 1; }
for c in fio perf python3; do command -v $c >/dev/null || { echo "bench.sh: needs $c (apt-get install fio linux-perf)" >&2; exit 1; }; done
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
data="$work/fio.dat"
fio --name=layout --filename="$data" --size=64M --rw=write --bs=1M --end_fsync=1 >/dev/null

# One workload run: fio random reads and perf bench sched pipe side by side,
# for $secs seconds. Prints "IOPS PIPE_OPS_PER_SEC".
workload() {
  fio --name=r --filename="$data" --size=64M --rw=randread --bs=4k --direct=1 --ioengine=psync \
      --runtime="$secs" --time_based --output-format=json >"$work/fio.json" &
  local fpid=$!
  local start end ops el
  start=$(date +%s%N)
  ops=0
  end=$((start + secs * 1000000000))
  while [ "$(date +%s%N)" -lt "$end" ]; do
    taskset -c 0,1 perf bench sched pipe -l 20000 >/dev/null 2>&1
    ops=$((ops + 20000))
  done
  el=$(( $(date +%s%N) - start ))
  wait $fpid
  python3 - "$work/fio.json" "$ops" "$el" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("%.0f %.0f" % (d["jobs"][0]["read"]["iops"], float(sys.argv[2]) / (float(sys.argv[3]) / 1e9)))
PY
}

declare -A iops pipe
run_cfg() { # name, then the tracer command prefix (empty: none)
  local name=$1; shift
  local r
  for i in $(seq "$reps"); do
    if [ "$name" = none ]; then
      r=$(workload)
    elif [ "$name" = perf ]; then
      perf record -q -o "$work/perf.data" -e power:cpu_idle -e block:block_rq_issue -e block:block_rq_complete -a \
        >/dev/null 2>"$work/perf.err" &
      local ppid=$!; sleep 1
      r=$(workload)
      kill -INT $ppid; wait $ppid || true
    else
      IT_FLAGS=${IT_FLAGS:-}
      "$bin" record -o "$work/idletrace.trace" --force -q $IT_FLAGS >/dev/null 2>"$work/it.err" &
      local ipid=$!; sleep 1.5
      r=$(workload)
      kill -INT $ipid; wait $ipid || true
    fi
    iops[$name]="${iops[$name]:-} ${r% *}"
    pipe[$name]="${pipe[$name]:-} ${r#* }"
  done
}

echo "bench: $reps runs of $secs s each per configuration (fio 4 KiB O_DIRECT randread + perf bench sched pipe on CPUs 0,1)"
IT_FLAGS=""
for cfg in none perf idletrace; do run_cfg $cfg; done
# One more idletrace run with the kernel's BPF statistics on (they cost two
# clock reads per program run, so they stay off for the throughput runs).
IT_FLAGS="--bpf-stats" reps=1 run_cfg idletrace-stats >/dev/null
cp "$work/idletrace.trace" "$work/idletrace-stats.trace"

median() { tr ' ' '\n' | sed '/^$/d' | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
n_iops=$(echo ${iops[none]} | median); p_iops=$(echo ${iops[perf]} | median); i_iops=$(echo ${iops[idletrace]} | median)
n_pipe=$(echo ${pipe[none]} | median); p_pipe=$(echo ${pipe[perf]} | median); i_pipe=$(echo ${pipe[idletrace]} | median)

# Per-event figures from the last run of each tracer.
perf_bytes=$(stat -c %s "$work/perf.data")
perf_idle=$(perf script -i "$work/perf.data" -F event 2>/dev/null | grep -c cpu_idle || true)
perf_lost=$(perf report -i "$work/perf.data" --stats 2>/dev/null | awk '/LOST/ {s+=$NF} END{print s+0}')
"$bin" info --format json "$work/idletrace-stats.trace" >"$work/info.json"
read -r it_bytes it_periods it_lost it_ns_per_event it_undelivered <<<"$(python3 - "$work/info.json" "$(stat -c %s "$work/idletrace.trace")" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); e = d["end"] or {}
lost = sum(l.get("IdleLost", 0) + l.get("IOLost", 0) + l.get("OtherLost", 0) for l in e.get("loss", []))
undelivered = sum(l.get("IOOrphaned", 0) + l.get("IdleUnpaired", 0) for l in e.get("loss", []))
runs = sum(p["run_count"] for p in e.get("prog_stats", []))
ns = sum(p["run_time_ns"] for p in e.get("prog_stats", []))
print(sys.argv[2], e.get("idle_periods", 0), lost, "%.0f" % (ns / runs if runs else 0), undelivered)
PY
)"

python3 - <<PY
rows = [
  ("workload: fio IOPS", $n_iops, $p_iops, $i_iops),
  ("workload: sched pipe ops/s", $n_pipe, $p_pipe, $i_pipe),
]
print()
print("| measure | no tracer | perf record | idletrace | perf/none | idletrace/none |")
print("|---|---|---|---|---|---|")
for name, n, p, i in rows:
    print("| %s | %.0f | %.0f | %.0f | %.3f | %.3f |" % (name, n, p, i, p / n, i / n))
perf_periods = max($perf_idle // 2, 1)
print("| bytes on disk per idle period | | %.1f | %.1f | | idletrace/perf %.3f |" % ($perf_bytes / perf_periods, $it_bytes / max($it_periods, 1), ($it_bytes / max($it_periods, 1)) / ($perf_bytes / perf_periods)))
print("| idle periods in last run | | %d | %d | | |" % (perf_periods, $it_periods))
print("| lost records (ring buffer full) | | %d | %d | | |" % ($perf_lost, $it_lost))
print("| events the kernel raised without running the BPF programs | | | %d | | |" % ($it_undelivered))
print("| BPF run time per event (ns, kernel BPF stats) | | | %s | | |" % ("$it_ns_per_event"))
PY

echo
echo "Go benchmarks (trace format, replay):"
go test -run '^$' -bench 'BenchmarkWriteIdle|BenchmarkReadIdle|BenchmarkReplayMenu$|BenchmarkReplayTEO|BenchmarkReplayOracle' -benchtime 1s -count 1 ./pkg/trace/ ./pkg/model/ 2>&1 | grep -E '^(Benchmark|ok|FAIL)'
