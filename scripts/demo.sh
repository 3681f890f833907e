#!/usr/bin/env bash
# make demo: record a few seconds on this machine and show stats and a
# what-if report. Without root or BPF, say why and use the bundled real trace.
set -u
bin=${1:-bin/idletrace}
out=demo
mkdir -p "$out"
trace="$out/demo.trace"
why=""
if [ "$(id -u)" != 0 ]; then
  why="not root (recording needs root or CAP_BPF+CAP_PERFMON)"
elif [ ! -e /sys/kernel/btf/vmlinux ]; then
  why="this kernel has no BTF (/sys/kernel/btf/vmlinux)"
fi
if [ -z "$why" ]; then
  echo "== recording on this machine while a small workload runs for 4 s (fio random reads + perf bench sched pipe, after laying out its file), with the kernel's BPF statistics (the recorder's own cost)"
  if "$bin" record --bpf-stats -o "$trace" --force -q -- scripts/workload.sh 4 "$out"; then
    :
  else
    why="recording failed (see the error above)"
  fi
fi
if [ -n "$why" ]; then
  echo "== cannot record here: $why; using the bundled trace testdata/demo.trace"
  trace=testdata/demo.trace
fi
echo
echo "== idletrace stats $trace"
"$bin" stats "$trace" || exit 1
echo
echo "== idletrace whatif $trace --profile spr --policy menu --policy menu+margin=25 --policy menu+blkqos=10us/3ms --policy oracle"
"$bin" whatif "$trace" --profile spr --policy menu --policy menu+margin=25 --policy menu+blkqos=10us/3ms --policy oracle || exit 1
"$bin" whatif "$trace" --profile spr --policy menu --policy menu+margin=25 --policy menu+blkqos=10us/3ms --policy oracle --format html -o "$out/whatif.html" --force || exit 1
echo
echo "== HTML report with plots: $out/whatif.html"
if [ -e "$out/idletrace-workload.dat" ]; then
  echo "== $out/ also keeps the workload's $(du -h "$out/idletrace-workload.dat" | cut -f1) data file, so that the next demo need not lay it out again (rm -r $out removes all of it)"
fi
