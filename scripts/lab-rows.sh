#!/usr/bin/env bash
# The lab's rows in the kernel matrix (issue 9, items 4–6): the governors'
# models held to the kernel's own choices on real servers' tables
# (TestLabFidelity), each governor replayed on the others' recordings
# (TestLabCrossGovernor) and the emulated exit latencies measured
# (TestLabExitLatency), then the README's generated lab-rows section:
# written from this run, or, with CI=true, the run held to it (each row it
# lists ran and passed; TCG's numbers vary from run to run, so they are not
# compared). The lab kernel is built in the background when not cached
# (about 9 minutes on 2 CPUs) while the rows on Debian's kernels run; rows
# run IDLETRACE_LAB_JOBS (default 2) at a time.
#
# Environment: IDLETRACE_LAB_FIDELITY and IDLETRACE_LAB_CROSS choose the
# fidelity rows and the cross-governor cases (see lab/labtest; the defaults
# are what CI holds: every fidelity row and every cross-governor pair:
# ladder and menu on Debian 6.12's icx, ladder, menu and teo on the lab
# kernel's icx and seed 000's table; an empty IDLETRACE_LAB_CROSS runs
# none). The cross cases run with POLL disabled (IDLETRACE_LAB_CROSS_POLL=1
# keeps it: under TCG it makes the polling governors' recordings differ).
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export IDLETRACE_LAB_FIDELITY=${IDLETRACE_LAB_FIDELITY-} # empty: every row
export IDLETRACE_LAB_CROSS=${IDLETRACE_LAB_CROSS-"6.12/icx lab/icx lab/seed000"}
# The emulation's own check (issue 9 item 1: each state's measured wake-up
# and IO latency against the table's exit latencies) on icx and seed 000's
# table, whose 31 µs C3 difference is the smallest the check resolves; about
# 2 minutes, alone after the parallel fidelity rows (it measures timings).
export IDLETRACE_LAB_TEST_PROFILES=${IDLETRACE_LAB_TEST_PROFILES-"icx lab/profiles/seed000.json"}
tests='^(TestLabFidelity|TestLabExitLatency)$'
[ -n "$IDLETRACE_LAB_CROSS" ] && tests='^(TestLabFidelity|TestLabExitLatency|TestLabCrossGovernor)$'
echo '[]' >"$tmp/cross.json"
t0=$(date +%s)
IDLETRACE_LAB_RESULTS=$tmp/fidelity.json IDLETRACE_LAB_CROSS_RESULTS=$tmp/cross.json \
	go test -count=1 -tags lab -timeout 60m -parallel 64 -v -run "$tests" ./lab/labtest
rc=$?
mode=-lab-write
[ "${CI:-}" = true ] && mode=-lab-check
go run ./scripts/matrixreport $mode -lab-by '`make test-kernels`' -readme README.md "$tmp/fidelity.json" "$tmp/cross.json" || rc=1
echo "lab-rows: done in $(($(date +%s) - t0)) s" >&2
exit $rc
