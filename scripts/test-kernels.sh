#!/usr/bin/env bash
# make test-kernels: the kernel matrix's download step (TestKernelFetch),
# the matrix (scripts/kernel-matrix.sh), then the lab's rows
# (scripts/lab-rows.sh), with the lab kernel's cold build (scripts/lab-kernel.sh,
# 11-13 minutes of both CPUs, the longest step of CI) started first.
#
# The build is CI's critical path and these machines have two CPUs, so it
# runs wherever the CPUs are idle and nowhere else:
#   - beside TestKernelFetch, which waits on the network and dpkg: the
#     build's own download and extraction run first, alone (both call
#     apt-get update, and a second one fails on apt's lock), then its
#     compiling overlaps the fetch;
#   - stopped (SIGSTOP) while the matrix runs: its recorder and referee
#     tests need idle CPUs (beside a build they failed: lab/README.md);
#   - resumed for the lab's rows, which wait for it as before.
# When the lab kernel is cached, none of this costs anything.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
log() { echo "test-kernels: $*" >&2; }
tmp=$(mktemp -d)
build=
trap '[ -n "$build" ] && kill -CONT -- -"$build" 2>/dev/null; rm -rf "$tmp"' EXIT

rc=0
# Its own session, so that it can be stopped and resumed as a whole.
setsid bash scripts/lab-kernel.sh >"$tmp/lab-kernel.log" 2>&1 &
build=$!
# Past apt (the source package downloaded, the tools installed): the line
# that starts the compile, or the end (cached, or failed: lab-rows.sh's
# own call reports that).
while kill -0 "$build" 2>/dev/null && ! grep -q 'lab-kernel: building' "$tmp/lab-kernel.log"; do
	sleep 1
done
go test -count=1 -tags kernelfetch -run '^TestKernelFetch$' ./scripts/matrixreport || rc=1
kill -STOP -- -"$build" 2>/dev/null && log "lab kernel build stopped while the matrix runs"
scripts/kernel-matrix.sh || rc=1
kill -CONT -- -"$build" 2>/dev/null && log "lab kernel build resumed"
scripts/lab-rows.sh || rc=1
wait "$build" 2>/dev/null
build=
exit $rc
