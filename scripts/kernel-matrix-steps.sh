#!/bin/sh
# The checks scripts/kernel-matrix.sh runs on one kernel, as root: inside a
# matrix VM (from its busybox /init) and on the host. POSIX sh, so that
# busybox sh and dash both run it.
#
#   kernel-matrix-steps.sh vm|host BINDIR DATADIR RESULTSDIR
#
# BINDIR holds idletrace and record.test (CGO_ENABLED=0 go test -c ./pkg/record);
# DATADIR is a directory on the block device whose IO is recorded; RESULTSDIR
# receives logs, traces and matrix.txt (key=value lines, also printed on the
# console as "MATRIX key=value"). Exit status 0 even when a check fails: the
# results say what failed, and the caller decides.
set -u
mode=$1 bin=$2 data=$3 res=$4
mkdir -p "$data/tmp" "$res"
: >"$res/matrix.txt"

say() {
	echo "MATRIX $*"
	echo "$*" >>"$res/matrix.txt"
}
# show FILE PREFIX: a log on the console, for whoever reads the CI output.
show() {
	sed "s/^/$2 /" "$1"
}

cpuidle=/sys/devices/system/cpu/cpuidle
say "target=$mode"
say "kernel=$(uname -r)"
say "cpuidle_driver=$(cat $cpuidle/current_driver 2>/dev/null || echo none)"
say "cpuidle_governor=$(cat $cpuidle/current_governor 2>/dev/null || cat $cpuidle/current_governor_ro 2>/dev/null || echo none)"
states=
for s in /sys/devices/system/cpu/cpu0/cpuidle/state*; do
	[ -d "$s" ] || continue
	states="$states${states:+,}$(cat "$s/name")"
done
say "cpuidle_states=${states:-none}"
if [ -e /sys/kernel/btf/vmlinux ]; then say "btf=yes"; else say "btf=no"; fi

# 1. The recorder's kernel tests (the referee: traced idle periods and block
#    IO against the kernel's own counters).
# Only the tests that ask the kernel: the others read fixtures beside the
# package's source, which the VM does not have.
(cd "$data" && TMPDIR="$data/tmp" IDLETRACE_REFEREE_TRACE="$res/referee.trace" "$bin/record.test" -test.v -test.count=1 -test.timeout=10m -test.run '^(TestKernelReferee|TestGovernorFidelity|TestIOTaskJoin|TestRecordLive|TestRecordSameSector|TestHotplugCounters|TestHotplugCameOnline)$') >"$res/referee.log" 2>&1
rc=$?
say "referee_rc=$rc"
show "$res/referee.log" referee:
# What failed, for the console (the caller keeps only the marked lines).
[ $rc = 0 ] || grep -E '_test\.go:[0-9]+: .*(want|must|never|carry|against|differ)' "$res/referee.log" | sed 's/^ */referee: FAIL-DETAIL /'

# 2. idletrace record for 3 s with block IO on the disk: one-block O_DIRECT
#    reads of a file on it, from a shell loop.
dd if=/dev/zero of="$data/blob" bs=1048576 count=16 conv=fsync 2>/dev/null
rm -f "$data/stop"
(
	i=0
	while [ ! -e "$data/stop" ]; do
		dd if="$data/blob" of=/dev/null bs=4096 count=1 skip=$(((i * 7919) % 4096)) iflag=direct 2>/dev/null
		i=$((i + 1))
	done
) &
wl=$!
"$bin/idletrace" record -q -d 3s --bpf-stats -o "$res/record.trace" 2>"$res/record.err"
say "record_rc=$?"
touch "$data/stop"
wait $wl
show "$res/record.err" record:
"$bin/idletrace" info "$res/record.trace" --format json >"$res/record-info.json" 2>>"$res/record.err"

# 3. idletrace stats on it.
"$bin/idletrace" stats "$res/record.trace" --format json >"$res/stats.json" 2>"$res/stats.err"
say "stats_rc=$?"
"$bin/idletrace" stats "$res/record.trace" >"$res/stats.txt" 2>>"$res/stats.err"
show "$res/stats.txt" stats:
show "$res/stats.err" stats:

# 4. The fallback path: every probe as a classic tracepoint.
"$bin/idletrace" record -q -d 2s --classic-tracepoints -o "$res/classic.trace" 2>"$res/classic.err"
say "classic_rc=$?"
show "$res/classic.err" classic:
"$bin/idletrace" info "$res/classic.trace" --format json >"$res/classic-info.json" 2>>"$res/classic.err"

# 5. A kernel without BTF, simulated: /sys/kernel/btf hidden under an empty
#    tmpfs in a private mount namespace. record must fail with one line that
#    names CONFIG_DEBUG_INFO_BTF and --kernel-btf; with --kernel-btf and a
#    copy of the kernel's BTF it must work.
if [ -e /sys/kernel/btf/vmlinux ]; then
	cp /sys/kernel/btf/vmlinux "$data/vmlinux.btf"
	nobtf() {
		unshare -m sh -c 'mount -t tmpfs nobtf /sys/kernel/btf && test ! -e /sys/kernel/btf/vmlinux && exec "$@"' sh "$@"
	}
	nobtf "$bin/idletrace" record -q -d 1s -o "$res/nobtf.trace" 2>"$res/nobtf.err"
	say "nobtf_rc=$?"
	say "nobtf_lines=$(wc -l <"$res/nobtf.err")"
	say "nobtf_file=$(test -e "$res/nobtf.trace" && echo created || echo none)"
	show "$res/nobtf.err" nobtf:
	nobtf "$bin/idletrace" record -q -d 2s --kernel-btf "$data/vmlinux.btf" -o "$res/kbtf.trace" 2>"$res/kbtf.err"
	say "kbtf_rc=$?"
	show "$res/kbtf.err" kbtf:
fi
say "steps=done"
