#!/usr/bin/env bash
# idletrace against perf record on the same workload and the same
# tracepoints, in one run:
#   workload throughput with no tracer, with perf record, with idletrace (ratios),
#   bytes on disk per idle period, BPF run time per event, lost records;
# then idletrace stats against idlestat --import on the same periods (wall
# time, peak RSS), export and import throughput, and the Go benchmarks of
# the trace format and the replay.
# Usage: scripts/bench.sh [BIN] (as root). REPS=3 SECS=5 by default.
set -euo pipefail
export LC_ALL=C # the decimal point of $EPOCHREALTIME and awk
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
      perf record -q -o "$work/perf.data" "${perf_events[@]}" -a >/dev/null 2>"$work/perf.err" &
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

# perf records the event set idletrace attaches on this kernel (every
# tracepoint a short recording's metadata lists as attached, not missing),
# so that the two tracers pay for the same events.
"$bin" record -o "$work/probe.trace" --force -q -d 1s >/dev/null 2>&1
perf_events=()
while read -r ev; do perf_events+=(-e "$ev"); done < <("$bin" info --format json "$work/probe.trace" | python3 -c '
import json, sys
for name, method in sorted(json.load(sys.stdin)["metadata"]["probes"].items()):
    if not method.startswith("missing"):
        print(name)')
[ ${#perf_events[@]} -gt 0 ] || { echo "bench.sh: no attached tracepoints in a test recording" >&2; exit 1; }

echo "bench: $reps runs of $secs s each per configuration (fio 4 KiB O_DIRECT randread + perf bench sched pipe on CPUs 0,1)"
names=$(printf '%s\n' "${perf_events[@]}" | grep -v '^-e$' | paste -sd' ')
echo "bench: perf record and idletrace both on $(( ${#perf_events[@]} / 2 )) tracepoints: $names"
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

# Reading the trace: idletrace stats on its trace against idlestat --import
# (Debian's idlestat 0.8) on the same periods exported as ftrace text
# (--stats-window: the periods stats counts), wall time and peak RSS, the
# median of at least 10 runs each; then export's throughput per format.
if command -v idlestat >/dev/null; then
  trace="$work/idletrace.trace"
  "$bin" export "$trace" --format ftrace --stats-window -q -o "$work/t.txt"
  periods=$("$bin" stats "$trace" --format json | python3 -c 'import json,sys; print(sum(c["periods"] for c in json.load(sys.stdin)["cpus"]))')
  # Wall time from bash's microsecond clock around the command itself
  # (/usr/bin/time's %e has 10 ms steps: half of a stats run), peak RSS
  # from /usr/bin/time on the same runs; the median of max($reps, 10)
  # runs, as a 20 ms run is easily disturbed.
  runs=$((reps > 10 ? reps : 10))
  timed() { # median wall s and peak RSS KiB of "$@"
    local w=() m=() t0 t1
    for _ in $(seq "$runs"); do
      t0=$EPOCHREALTIME
      "$@" >/dev/null 2>&1
      t1=$EPOCHREALTIME
      w+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')")
      /usr/bin/time -f "%M" -o "$work/time.txt" "$@" >/dev/null 2>&1
      m+=("$(cat "$work/time.txt")")
    done
    echo "$(echo "${w[*]}" | median) $(echo "${m[*]}" | median)"
  }
  read -r it_s it_kb <<<"$(timed "$bin" stats "$trace" --format json)"
  read -r is_s is_kb <<<"$(timed idlestat --import -f "$work/t.txt" -o "$work/idlestat.out")"
  ex=()
  for f in ftrace csv parquet perfetto; do
    mkdir -p "$work/ex-$f"
    read -r s _ <<<"$(timed "$bin" export "$trace" --format $f --force -q -o "$work/ex-$f")"
    ex+=("$f" "$s")
  done
  # Import: the ftrace text back into a trace.
  read -r im_s _ <<<"$(timed "$bin" import "$work/t.txt" -o "$work/imported.trace" --force -q)"
  python3 - <<PY
periods, it_s, it_kb, is_s, is_kb = $periods, $it_s, $it_kb, $is_s, $is_kb
print()
print("| reading %d idle periods | idletrace stats | idlestat --import | idlestat/idletrace |" % periods)
print("|---|---|---|---|")
print("| wall time (s, median of $runs) | %.4f | %.4f | %.1f× |" % (it_s, is_s, is_s / max(it_s, 1e-6)))
print("| idle periods per second | %.0f | %.0f | |" % (periods / max(it_s, 1e-6), periods / max(is_s, 1e-6)))
print("| peak RSS (MiB) | %.1f | %.1f | %.2f |" % (it_kb / 1024, is_kb / 1024, is_kb / max(it_kb, 1)))
ex = "${ex[*]}".split()
print()
print("| export format | wall time (s) | idle periods per second |")
print("|---|---|---|")
for f, s in zip(ex[::2], ex[1::2]):
    print("| %s | %.3f | %.0f |" % (f, float(s), periods / max(float(s), 1e-3)))
print("| import (of the ftrace text) | %.3f | %.0f |" % ($im_s, periods / max($im_s, 1e-3)))
PY
else
  echo "bench: no idlestat (apt-get install idlestat): the stats/idlestat comparison is left out" >&2
fi

echo
echo "Go benchmarks (trace format, replay):"
go test -run '^$' -bench 'BenchmarkWriteIdle|BenchmarkReadIdle|BenchmarkReplayMenu$|BenchmarkReplayTEO|BenchmarkReplayOracle' -benchtime 1s -count 1 ./pkg/trace/ ./pkg/model/ 2>&1 | grep -E '^(Benchmark|ok|FAIL)'
