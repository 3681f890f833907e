#!/usr/bin/env bash
# Kernel matrix (make test-kernels): runs the recorder's kernel tests,
# `idletrace record` with block IO, `idletrace stats`, the classic-tracepoint
# fallback and a simulated kernel without BTF, on the host kernel and on
# Debian's cloud kernels (bookworm's 6.1 and 6.12, trixie-backports' 7.3)
# booted under QEMU, and
# prints one row per kernel. Needs root. Writes testdata/kernel-matrix.{json,md}
# and the README's requirements section from the result; with CI=true (or
# --check) it only checks that they still match the result: in what the project
# promises (the kernels, their options, probes, inputs and every verdict), not
# in the identity of the machine it runs on (see CompareRows in
# scripts/matrixreport: the host's build, cpuidle driver, timings and the date
# may differ, as machines of this kind do).
#
# Environment:
#   IDLETRACE_KERNEL_CACHE  where kernel packages are kept between runs
#                           (default /var/cache/idletrace-kernels; see
#                           scripts/kernel-cache.sh). --fetch only fills it:
#                           downloads and extracts the kernels, prints
#                           SERIES=DIR lines and exits
#   IDLETRACE_KERNELS       Debian kernel series to boot (default "6.1 6.12 7.3");
#                           "lab" is the lab kernel (scripts/lab-kernel.sh,
#                           built into the cache when missing)
#   IDLETRACE_KERNEL_REFRESH=1  look for newer kernel packages even when cached
#   IDLETRACE_MATRIX_CPUIDLE=none  boot the VMs without the ACPI _CST table
#                           (no cpuidle driver; see below)
#
# The VMs: QEMU TCG (KVM does not work on this project's machines, which are
# VMs themselves), single-threaded: with one host thread per vCPU, a CPU can
# run a stale translation of kernel text that another CPU is patching (a
# tracepoint being enabled), and 6.12 then dies of an int3 Oops in
# cpuidle_enter_state; deterministic -icount would be better still, but
# Debian's 6.1 does not bring up its second CPU under it. 2 CPUs, an NVMe disk (built into Debian's kernels: no
# modules needed) for the block IO and a second one that carries the results
# out, an initramfs with busybox-static. QEMU's own ACPI tables give the
# CPUs no C-states (Processor objects without P_BLK, no _CST), so a guest has
# no cpuidle driver; the matrix adds an SSDT with a _CST (C1 = HLT, 10 us) for
# each CPU, and the guest then runs acpi_idle with POLL and C1, so that the
# referee's cpuidle-counters check runs there.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

CHECK=0 FETCH=0
[ "${CI:-}" = true ] && CHECK=1
for a in "$@"; do
	case $a in
	--check) CHECK=1 ;;
	--write) CHECK=0 ;;
	--fetch) FETCH=1 ;;
	*) echo "usage: $0 [--check|--write|--fetch]" >&2; exit 2 ;;
	esac
done

CACHE=${IDLETRACE_KERNEL_CACHE:-/var/cache/idletrace-kernels}
SERIES=${IDLETRACE_KERNELS:-6.1 6.12 7.3}
CPUIDLE=${IDLETRACE_MATRIX_CPUIDLE:-acpi}
SMP=2
export PATH=/usr/local/go/bin:$PATH
# shellcheck source=kernel-cache.sh
. scripts/kernel-cache.sh # log, apt_update, safe_rm, kernel_deb, kernel_dir

if [ "$(id -u)" != 0 ]; then
	echo "kernel-matrix: needs root (BPF on the host, and the recorder's tests)" >&2
	exit 1
fi
t0=$(date +%s)

WORK=$(mktemp -d /var/tmp/idletrace-matrix.XXXXXX)
trap 'safe_rm "$WORK"' EXIT

# --- tools -----------------------------------------------------------------
need=()
if [ $FETCH = 0 ]; then
	command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
	[ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 || need+=(busybox-static)
	command -v cpio >/dev/null || need+=(cpio)
	command -v iasl >/dev/null || need+=(acpica-tools)
	command -v unshare >/dev/null || need+=(util-linux)
fi
if [ ${#need[@]} -gt 0 ]; then
	log "installing ${need[*]}"
	apt_update
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

# --- kernels (cached) --------------------------------------------------------
# With --fetch, only this step: prints SERIES=DIR for each kernel extracted
# (DIR/boot holds vmlinuz-* and config-*), and fails unless every series was.
mkdir -p "$CACHE"
declare -A kdirs=()
fetched=0
for s in $SERIES; do
	# "lab": the lab kernel, built once into the same cache (scripts/lab-kernel.sh).
	if [ "$s" = lab ]; then
		dir=$(scripts/lab-kernel.sh) && kdirs[$s]=$dir && fetched=$((fetched + 1))
		continue
	fi
	if deb=$(kernel_deb "$s") && dir=$(kernel_dir "$deb"); then
		kdirs[$s]=$dir
		fetched=$((fetched + 1))
	fi
done
if [ $FETCH = 1 ]; then
	for s in $SERIES; do
		[ -n "${kdirs[$s]:-}" ] && echo "$s=${kdirs[$s]}"
	done
	[ $fetched = "$(echo $SERIES | wc -w)" ] && exit 0
	exit 1
fi

# --- what goes into every VM -------------------------------------------------
log "building idletrace and the recorder's test binary"
make -s build
mkdir -p "$WORK/bin"
cp bin/idletrace "$WORK/bin/"
CGO_ENABLED=0 go test -c -o "$WORK/bin/record.test" ./pkg/record
cp scripts/kernel-matrix-steps.sh "$WORK/bin/"

rootfs=$WORK/rootfs
mkdir -p "$rootfs"/{bin,boot,proc,sys,dev,tmp,data,results}
cp /bin/busybox "$WORK"/bin/{idletrace,record.test,kernel-matrix-steps.sh} "$rootfs/bin/"
for k in "${kdirs[@]}"; do cp "$k"/boot/config-* "$rootfs/boot/"; done # HZ and NO_HZ for the trace
cat >"$rootfs/init" <<'EOF'
#!/bin/busybox sh
# Mount first, then start Go programs: cilium/ebpf reads /proc/self/mountinfo
# once, in a package init.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tracefs tracefs /sys/kernel/tracing
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /results
data= results=
for b in /sys/block/nvme*; do
	case "$(cat "$b/device/serial")" in
	idt-data*) data=${b##*/} ;;
	idt-results*) results=${b##*/} ;;
	esac
done
if [ -n "$data" ] && mke2fs -q "/dev/$data" && mount -t ext2 "/dev/$data" /data; then
	IDLETRACE_VM=1 IDLETRACE_FIDELITY_KEEP=/results \
		sh /bin/kernel-matrix-steps.sh vm /bin /data /results
else
	echo "MATRIX data_disk=failed"
fi
[ -n "$results" ] && tar -cf "/dev/$results" -C /results . && sync
echo "MATRIX-END"
poweroff -f
EOF
chmod +x "$rootfs/init"
(cd "$rootfs" && find . | cpio -o -H newc --quiet -R 0:0 >"$WORK/initrd.cpio") # not gzipped: as lab.sh

acpitable=()
if [ "$CPUIDLE" = acpi ]; then
	{
		echo 'DefinitionBlock ("", "SSDT", 2, "IDLTRC", "CST", 1)'
		echo '{'
		for ((c = 0; c < SMP; c++)); do
			printf '    External (\\_SB.CPUS.C%03X, ProcessorObj)\n' $c
			printf '    Scope (\\_SB.CPUS.C%03X) { Name (_CST, Package () { One,\n' $c
			echo '        Package () { ResourceTemplate () { Register (FFixedHW, 0, 0, 0, 0) }, One, 10, 1000 } }) }'
		done
		echo '}'
	} >"$WORK/cst.asl"
	iasl -p "$WORK/cst" "$WORK/cst.asl" >/dev/null
	acpitable=(-acpitable "file=$WORK/cst.aml")
fi

# --- run ---------------------------------------------------------------------
targets=()

log "host: $(uname -r)"
mkdir -p "$WORK/host/data" "$WORK/host/results"
hs=$(date +%s)
sh scripts/kernel-matrix-steps.sh host "$WORK/bin" "$WORK/host/data" "$WORK/host/results" |
	sed -u 's/^/  host | /' | grep -a -E '\| (MATRIX|referee: *(---|FAIL|ok)|record:|nobtf:)' || true
hostcfg=$WORK/host/config
if [ -r /proc/config.gz ]; then zcat /proc/config.gz >"$hostcfg"; elif [ -r "/boot/config-$(uname -r)" ]; then cp "/boot/config-$(uname -r)" "$hostcfg"; else : >"$hostcfg"; fi
{
	echo "total_s=$(($(date +%s) - hs))"
	echo "machine=this machine (no VM)"
	echo "config_file=$hostcfg"
} >>"$WORK/host/results/matrix.txt"
targets+=("host=$WORK/host/results")

for s in $SERIES; do
	kdir=${kdirs[$s]:-}
	if [ -z "$kdir" ]; then
		targets+=("$s=$WORK/missing-$s")
		continue
	fi
	pkgver=${kdir##*/} # kernel_dir extracts next to the .deb, under its name
	vmlinuz=$(ls "$kdir"/boot/vmlinuz-* | head -1)
	log "$s: booting $(basename "$vmlinuz") under QEMU TCG"
	d=$WORK/$s
	mkdir -p "$d/results"
	truncate -s 256M "$d/data.img"
	truncate -s 64M "$d/results.img"
	vs=$(date +%s)
	rc=0
	# RDRAND seeds the guest's RNG at boot (mke2fs and the Go binaries
	# otherwise block in getrandom for seconds of jitter entropy; as lab.sh).
	timeout 600 qemu-system-x86_64 -accel tcg,thread=single -M pc -cpu qemu64,+rdrand -m 1024 -smp $SMP \
		-kernel "$vmlinuz" -initrd "$WORK/initrd.cpio" -append "console=ttyS0 panic=-1 quiet" \
		-nographic -no-reboot "${acpitable[@]}" \
		-drive "file=$d/data.img,if=none,format=raw,id=d0" -device nvme,drive=d0,serial=idt-data \
		-drive "file=$d/results.img,if=none,format=raw,id=d1" -device nvme,drive=d1,serial=idt-results \
		</dev/null >"$d/serial.log" 2>&1 || rc=$?
	tr -d '\r' <"$d/serial.log" | grep -a -E '^(MATRIX|referee: *(---|FAIL|ok)|referee: .*(agreement|above/below|reads waited|known wake cause|reads of one block|flushes traced)|record:|nobtf:)' | sed "s/^/  $s | /" || true
	if [ $rc != 0 ]; then
		log "$s: qemu exited with status $rc (124: timed out); the serial log ends:"
		tail -20 "$d/serial.log" >&2
	fi
	tar -xf "$d/results.img" -C "$d/results" 2>/dev/null || true
	if [ -f "$d/results/matrix.txt" ]; then
		machine="QEMU TCG (single-threaded), $SMP CPUs"
		[ "$CPUIDLE" = acpi ] && machine="$machine, ACPI _CST with C1"
		{
			echo "qemu_rc=$rc"
			echo "total_s=$(($(date +%s) - vs))"
			echo "machine=$machine"
			echo "package=$pkgver"
			echo "config_file=$(ls "$kdir"/boot/config-* | head -1)"
		} >>"$d/results/matrix.txt"
	fi
	cp "$d/serial.log" "$d/results/" 2>/dev/null || true
	rm -f "$d/data.img"
	targets+=("$s=$d/results")
done

# --- report ------------------------------------------------------------------
mode=-write
[ $CHECK = 1 ] && mode=-check
rc=0
go run ./scripts/matrixreport $mode -out testdata/kernel-matrix -readme README.md "${targets[@]}" || rc=$?
if [ -n "${IDLETRACE_MATRIX_KEEP:-}" ]; then
	mkdir -p "$IDLETRACE_MATRIX_KEEP"
	for s in host $SERIES; do
		[ -d "$WORK/$s" ] && { cp -r "$WORK/$s" "$IDLETRACE_MATRIX_KEEP"/ || log "keeping $s's results failed"; }
	done
	log "results kept in $IDLETRACE_MATRIX_KEEP"
fi
log "done in $(($(date +%s) - t0)) s"
exit $rc
