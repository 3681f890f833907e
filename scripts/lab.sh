#!/usr/bin/env bash
# The lab runner (issue 9): boots a VM whose CPUs idle through the lab's
# emulated cpuidle driver (lab/idle_emu) with a real machine's state table, and
# runs one command in it.
#
#   scripts/lab.sh [--kernel 6.1|6.12|lab] [--profile NAME|FILE] [--governor NAME]
#                  [--cpus N] [--in DIR] [--out DIR] -- COMMAND [ARG...]
#
# Defaults: --kernel 6.12, --profile spr, --governor menu, --cpus 2. The
# profile is a built-in name or a profile file, as `idletrace profiles`
# takes it; its table is loaded into the emulated driver (a one-line error
# when it cannot be). COMMAND runs as root in a directory holding a copy of
# --in DIR, with idletrace and fio (with its libraries) on PATH, sysfs,
# tracefs, /dev/cpu_dma_latency, and a scratch ext2 filesystem on an NVMe disk
# at /data; what it writes under /out is copied into --out DIR. Its standard
# output and error come back on the runner's. See lab/README.md.
#
# Exit status: COMMAND's; 2 for a usage error; 125 (one line on stderr) when
# the lab cannot run it: a kernel, module or profile that cannot be had, a VM
# that does not boot, a governor the kernel lacks.
#
# Environment:
#   IDLETRACE_KERNEL_CACHE   kernel packages, headers, built modules and the
#                            lab kernel (default /var/cache/idletrace-kernels)
#   IDLETRACE_LAB_KERNEL_DIR the lab kernel (default $CACHE/lab-kernel-SERIES):
#                            vmlinuz, config, and build/ (its tree, modules
#                            built: make -C build M=... must work)
#   IDLETRACE_LAB_SERIES     the lab kernel's Linux series, 6.12 (default),
#                            7.3 or 6.1 (scripts/lab-kernel.sh)
#   IDLETRACE_LAB_TIMEOUT    seconds before the VM is killed (default 3600)
#   IDLETRACE_LAB_MEM        guest memory in MiB (default 2048)
#   IDLETRACE_LAB_DISK       size of /data and of /out's disk (default 1G)
#   IDLETRACE_LAB_KEEP=DIR   keep the console log and the VM's files there
#   IDLETRACE_LAB_APPEND     extra kernel command-line words
#   IDLETRACE_LAB_NULL_LATENCY_NS  when set, a third NVMe disk, /dev/lab-null in the VM:
#                            QEMU's null-co driver (reads give zeroes, writes are
#                            dropped) completing every request after this many ns,
#                            so that each IO completion finds its CPU idle
#   IDLETRACE_LAB_NULL_DISK  how that disk is served: nvme (default: QEMU's NVMe
#                            device, whose null-co timer runs in QEMU's main loop
#                            and fires at its next whole-millisecond wake-up, so
#                            a read's latency moves with whatever else wakes the
#                            main loop), virtio (a virtio disk served by a QEMU
#                            iothread of its own, whose timers are not rounded;
#                            lab kernel only) or guest (the lab kernel's null_blk
#                            in timer mode: each completion is the guest's own
#                            hrtimer on the issuing CPU, the wake-up a timer
#                            interrupt, not a device's)
#   IDLETRACE_LAB_TCG        single (default, as the kernel matrix) or multi: one
#                            host thread per vCPU (spins of two CPUs overlap, and
#                            idle_emu's spins do not yield: spin_yield=0; but see
#                            kernel-matrix.sh on text patching under it)
#   IDLETRACE_LAB_EMU_PARAMS extra idle_emu module parameters, e.g. hold_irq=0
#                            (pay after HLT, handler first) or yield_min_ns=50000
#   IDLETRACE_LAB_DATA_OPTS  extra QEMU -drive options for /data's disk, e.g.
#                            throttling.iops-total=500 (IO completions that find
#                            the CPU idle; lab/labtest uses it)
#   IDLETRACE_LAB_TOOLS=DIR  idletrace and labprofile built already (CGO_ENABLED=0,
#                            from this tree): used instead of building them, as
#                            lab/labtest does once for all its runs (each build
#                            links for about 2 s)
set -euo pipefail

die() { echo "lab.sh: $*" >&2; exit 125; }
synopsis="usage: scripts/lab.sh [--kernel 6.1|6.12|lab] [--profile NAME|FILE] [--governor NAME] [--cpus N] [--in DIR] [--out DIR] -- COMMAND [ARG...]"
usage() {
	echo "$synopsis" >&2
	exit 2
}
help() {
	cat <<HELP
$synopsis

Boots a VM whose CPUs idle through lab/idle_emu with a real machine's
C-state table, selects the kernel's governor, and runs COMMAND as root
there (idletrace and fio on PATH, --in's files in its directory, a scratch
disk at /data; what it writes to /out comes back in --out).

  --kernel    6.1, 6.12 (Debian's) or lab (6.12, or IDLETRACE_LAB_SERIES=7.3
              or 6.1, with teo and the lab's switches (6.1: teo only),
              built once by scripts/lab-kernel.sh)              default 6.12
  --profile   a built-in profile (idletrace profiles) or a profile file
                                                                default spr
  --governor  menu, ladder, or teo (lab kernel only)            default menu
  --cpus      vCPUs                                             default 2
  --in DIR, --out DIR

Exit status: COMMAND's; 2 usage; 125 the lab could not run it. Details and
environment variables: lab/README.md.
HELP
	exit 0
}

KERNEL=6.12 PROFILE=spr GOVERNOR=menu CPUS=2 IN= OUT=
while [ $# -gt 0 ]; do
	case $1 in
	--kernel | --profile | --governor | --cpus | --in | --out)
		[ $# -ge 2 ] || usage
		case $1 in
		--kernel) KERNEL=$2 ;;
		--profile) PROFILE=$2 ;;
		--governor) GOVERNOR=$2 ;;
		--cpus) CPUS=$2 ;;
		--in) IN=$2 ;;
		--out) OUT=$2 ;;
		esac
		shift 2
		;;
	--kernel=* | --profile=* | --governor=* | --cpus=* | --in=* | --out=*)
		v=${1#*=}
		case $1 in
		--kernel=*) KERNEL=$v ;;
		--profile=*) PROFILE=$v ;;
		--governor=*) GOVERNOR=$v ;;
		--cpus=*) CPUS=$v ;;
		--in=*) IN=$v ;;
		--out=*) OUT=$v ;;
		esac
		shift
		;;
	--) shift; break ;;
	-h | --help) help ;;
	*) echo "lab.sh: unknown option $1" >&2; usage ;;
	esac
done
[ $# -ge 1 ] || usage
case $KERNEL in 6.1 | 6.12 | lab) ;; *) echo "lab.sh: --kernel must be 6.1, 6.12 or lab (Linux 7.3 or 6.1 with teo: --kernel lab with IDLETRACE_LAB_SERIES=7.3 or 6.1)" >&2; usage ;; esac
case $CPUS in '' | *[!0-9]* | 0) echo "lab.sh: --cpus must be a positive number" >&2; usage ;; esac
case $GOVERNOR in '' | *[!a-z0-9_]*) echo "lab.sh: --governor must be a governor's name" >&2; usage ;; esac
[ -z "$IN" ] || [ -d "$IN" ] || { echo "lab.sh: --in $IN is not a directory" >&2; usage; }
[ "$(id -u)" = 0 ] || die "needs root (apt-get for the kernel packages and QEMU)"

IN=${IN:+$(realpath "$IN")}
OUT=${OUT:+$(realpath -m "$OUT")}
PROFILE_ARG=$PROFILE
[ -f "$PROFILE" ] && PROFILE_ARG=$(realpath "$PROFILE")
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=${IDLETRACE_KERNEL_CACHE:-/var/cache/idletrace-kernels}
TIMEOUT=${IDLETRACE_LAB_TIMEOUT:-3600}
MEM=${IDLETRACE_LAB_MEM:-2048}
DISK=${IDLETRACE_LAB_DISK:-1G}
export PATH=/usr/local/go/bin:$PATH
# shellcheck source=kernel-cache.sh
. scripts/kernel-cache.sh # log, apt_update, safe_rm, kernel_deb, kernel_dir
# shellcheck source=lab-emu.sh
. scripts/lab-emu.sh # headers_dir, emu_module
log() { echo "lab.sh: $*" >&2; }
quiet_log() { [ -n "${IDLETRACE_LAB_VERBOSE:-}" ] && log "$@"; return 0; }

mkdir -p "$CACHE"
WORK=$(mktemp -d /var/tmp/idletrace-lab.XXXXXX)
qpid=
cleanup() {
	[ -n "$qpid" ] && kill "$qpid" 2>/dev/null
	if [ -n "${IDLETRACE_LAB_KEEP:-}" ]; then
		mkdir -p "$IDLETRACE_LAB_KEEP" && cp "$WORK"/*.log "$IDLETRACE_LAB_KEEP"/ 2>/dev/null
	fi
	safe_rm "$WORK"
}
trap cleanup EXIT

# Runs share the cache and apt: one at a time installs tools, fetches and
# extracts kernels and headers, and builds the module (parallel runs on a
# cold cache removed each other's half-extracted headers). Once cached,
# these steps only look things up.
exec 9>"$CACHE/.lab.lock"
flock 9

# --- tools -------------------------------------------------------------------
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
[ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 || need+=(busybox-static)
command -v cpio >/dev/null || need+=(cpio)
command -v fio >/dev/null || need+=(fio)
command -v debugfs >/dev/null || need+=(e2fsprogs)
command -v gcc-12 >/dev/null || need+=(gcc-12)
command -v make >/dev/null || need+=(make)
if [ ${#need[@]} -gt 0 ]; then
	log "installing ${need[*]}"
	apt_update
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null || die "apt-get install ${need[*]} failed"
fi

# --- kernel and module ---------------------------------------------------------
if [ "$KERNEL" = lab ]; then
	kdir=${IDLETRACE_LAB_KERNEL_DIR:-$CACHE/lab-kernel-${IDLETRACE_LAB_SERIES:-6.12}}
	[ -f "$kdir/vmlinuz" ] && [ -f "$kdir/config" ] && [ -f "$kdir/build/Module.symvers" ] ||
		die "--kernel lab: the lab kernel is not built yet (expected $kdir/vmlinuz, $kdir/config and $kdir/build/ with Module.symvers)"
	vmlinuz=$kdir/vmlinuz config=$kdir/config kbuild=$kdir/build
else
	deb=$(kernel_deb "$KERNEL") || die "no Debian kernel $KERNEL (see the lines above)"
	kdir=$(kernel_dir "$deb") || die "cannot extract $deb"
	vmlinuz=$(ls "$kdir"/boot/vmlinuz-* | head -1)
	config=$(ls "$kdir"/boot/config-* | head -1)
	kbuild=$(headers_dir "$deb") || die "no headers for Debian kernel $KERNEL (see the lines above)"
fi
# The governor must be built in, and haltpoll registers only under KVM,
# which the lab does not use (TCG): said before booting.
have=$(sed -n 's/^CONFIG_CPU_IDLE_GOV_\([A-Z0-9_]*\)=y$/\1/p' "$config" | tr 'A-Z' 'a-z' | grep -vx haltpoll | tr '\n' ' ')
case " $have" in *" $GOVERNOR "*) ;; *)
	hint=
	[ "$KERNEL" != lab ] && [ "$GOVERNOR" = teo ] && hint="; teo is the lab kernel's: --kernel lab (IDLETRACE_LAB_SERIES=${IDLETRACE_LAB_SERIES:-6.12})"
	die "governor $GOVERNOR is not in kernel $KERNEL (it has: ${have% }; haltpoll registers only under KVM, and the lab runs TCG$hint)" ;;
esac
ko=$(emu_module "$kbuild") || die "cannot build lab/idle_emu for $kbuild (see the lines above)"
flock -u 9

# --- idletrace, the profile -----------------------------------------------------
if [ -n "${IDLETRACE_LAB_TOOLS:-}" ]; then
	for f in idletrace labprofile; do
		[ -x "$IDLETRACE_LAB_TOOLS/$f" ] || die "IDLETRACE_LAB_TOOLS=$IDLETRACE_LAB_TOOLS has no $f"
		ln -s "$IDLETRACE_LAB_TOOLS/$f" "$WORK/$f"
	done
else
	CGO_ENABLED=0 go build -trimpath -o "$WORK/idletrace" ./cmd/idletrace 2>"$WORK/go.log" ||
		{ tail -5 "$WORK/go.log" >&2; die "building idletrace failed"; }
	CGO_ENABLED=0 go build -trimpath -o "$WORK/labprofile" ./lab/labprofile 2>"$WORK/go.log" ||
		{ tail -5 "$WORK/go.log" >&2; die "building lab/labprofile failed"; }
fi
# No such profile, or a profile file idletrace cannot read, is a usage
# error (2, as idletrace gives it); one it reads but the lab cannot emulate
# is the lab's (125, below).
prc=0
"$WORK/idletrace" profiles "$PROFILE_ARG" --format json >"$WORK/profile.json" 2>"$WORK/profile.err" || prc=$?
if [ $prc -ne 0 ]; then
	echo "lab.sh: $(head -1 "$WORK/profile.err")" >&2
	[ $prc -eq 2 ] && exit 2
	exit 125
fi
params=$("$WORK/labprofile" <"$WORK/profile.json" 2>"$WORK/profile.err") || die "$(head -1 "$WORK/profile.err")"
phz=$(sed -n 's/^  "hz": \([0-9]*\),*$/\1/p' "$WORK/profile.json")
khz=$(sed -n 's/^CONFIG_HZ=//p' "$config")
[ -z "$phz" ] || [ "$phz" = "$khz" ] || log "note: profile $PROFILE is for HZ=$phz, kernel $KERNEL runs HZ=$khz"

# --- the VM's files --------------------------------------------------------------
rootfs=$WORK/rootfs
mkdir -p "$rootfs"/{bin,usr/local/bin,proc,sys,dev,tmp,data,out,work,lab,mnt/out}
cp /bin/busybox "$rootfs/bin/"
cp -L "$WORK/idletrace" "$rootfs/usr/local/bin/"
cp "$ko" "$rootfs/lab/idle_emu.ko"
cp "$config" "$rootfs/lab/config"
cp "$WORK/profile.json" "$rootfs/lab/profile.json"
# fio and every library it links, at their own paths (the loader's too).
fio=$(command -v fio)
cp "$fio" "$rootfs/usr/local/bin/fio"
for lib in $(ldd "$fio" | awk '/=> \// {print $3} /^\t\/[^ ]+ \(/ {print $1}'); do
	mkdir -p "$rootfs$(dirname "$lib")"
	cp -L "$lib" "$rootfs$lib"
done
[ -z "$IN" ] || cp -a "$IN"/. "$rootfs/work/"

# COMMAND, quoted for sh: each word in single quotes.
{
	printf 'exec'
	for a in "$@"; do
		printf " '%s'" "${a//\'/\'\\\'\'}"
	done
	printf '\n'
} >"$rootfs/lab/cmd.sh"
# The exit-latency spins hand the host thread over (PAUSE) only where one
# host thread runs every vCPU; under multi-threaded TCG each vCPU has its
# own, and a PAUSE only sends the spinning vCPU through QEMU's exit path,
# where it contends with the devices' emulation: with it, a 1 ms null disk's
# reads took 300 µs longer while the CPUs used C6 (lab/README.md).
[ "${IDLETRACE_LAB_TCG:-single}" = multi ] && params="$params spin_yield=0"
params="$params ${IDLETRACE_LAB_EMU_PARAMS:-}"
echo "insmod /lab/idle_emu.ko $params" >"$rootfs/lab/insmod.sh"
echo "$GOVERNOR" >"$rootfs/lab/governor"

cat >"$rootfs/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/usr/local/bin:/bin:/usr/bin:/sbin:/usr/sbin HOME=/root
echo LAB-INIT
mount -t proc proc /proc
# The kernel's config where the recorder looks for HZ and NO_HZ.
mkdir -p /boot && cp /lab/config "/boot/config-$(uname -r)"
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tracefs tracefs /sys/kernel/tracing
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
mount -t tmpfs tmpfs /tmp
fail() { echo "LAB-ERROR=$*"; poweroff -f; }
data= out=
for b in /sys/block/nvme*; do
	case "$(cat "$b/device/serial")" in
	lab-data*) data=${b##*/} ;;
	lab-out*) out=${b##*/} ;;
	lab-null*) ln -s "/dev/${b##*/}" /dev/lab-null ;;
	esac
done
for b in /sys/block/vd* /sys/block/nullb*; do
	[ -e "$b" ] || continue
	case "$(cat "$b/serial" 2>/dev/null)" in lab-null*) ln -s "/dev/${b##*/}" /dev/lab-null ;; esac
	case "${b##*/}" in nullb*) ln -s "/dev/${b##*/}" /dev/lab-null ;; esac
done
[ -n "$data" ] && [ -n "$out" ] || fail "the VM has no NVMe disks"
mount -t ext2 "/dev/$data" /data || fail "cannot mount /data from /dev/$data"
mount -t ext2 "/dev/$out" /mnt/out && mkdir /mnt/out/out &&
	mount -o bind /mnt/out/out /out || fail "cannot make /out on /dev/$out"
drv=$(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null)
[ "$drv" = none ] || [ -z "$drv" ] || fail "a cpuidle driver ($drv) is registered already: the emulated one cannot be"
if ! sh /lab/insmod.sh 2>/tmp/insmod.err; then
	fail "loading idle_emu: $(dmesg | grep idle_emu | tail -1 | sed 's/^\[[^]]*\] //') $(cat /tmp/insmod.err)"
fi
gov=$(cat /lab/governor)
cur=$(cat /sys/devices/system/cpu/cpuidle/current_governor)
if [ "$cur" != "$gov" ]; then
	echo "$gov" >/sys/devices/system/cpu/cpuidle/current_governor 2>/dev/null
	cur=$(cat /sys/devices/system/cpu/cpuidle/current_governor)
	[ "$cur" = "$gov" ] || fail "governor $gov is not in kernel $(uname -r) (it has: $(echo $(cat /sys/devices/system/cpu/cpuidle/available_governors)))"
fi
echo "LAB-READY kernel=$(uname -r) driver=$(cat /sys/devices/system/cpu/cpuidle/current_driver) governor=$cur states=$(cat /sys/devices/system/cpu/cpu0/cpuidle/state*/name | tr '\n' ' ')"
echo "LAB-CALIBRATION $(cat /sys/module/idle_emu/parameters/calibration)"
stty -F /dev/ttyS1 raw -echo 2>/dev/null
stty -F /dev/ttyS2 raw -echo 2>/dev/null
cd /work
sh /lab/cmd.sh </dev/null >/dev/ttyS1 2>/dev/ttyS2
rc=$?
cd /
sync
umount /out && umount /mnt/out || echo "LAB-ERROR=cannot unmount /out"
echo "LAB-STATUS=$rc"
poweroff -f
EOF
chmod +x "$rootfs/init"
# Uncompressed: gzip took 2.6 s here and the guest's unpacking under TCG
# another 1.3 s; QEMU loads the 120 MB as it is.
(cd "$rootfs" && find . | cpio -o -H newc --quiet -R 0:0 >"$WORK/initrd.cpio")
truncate -s "$DISK" "$WORK/data.img" "$WORK/out.img"
# The filesystems are made here, with an inode per 256 KiB: in the VM,
# mke2fs wrote 16 MiB of inode tables a disk.
for img in data out; do
	mke2fs -q -F -t ext2 -i 262144 "$WORK/$img.img" >"$WORK/mke2fs.log" 2>&1 ||
		die "mke2fs $img.img: $(head -1 "$WORK/mke2fs.log")"
done

# --- run ---------------------------------------------------------------------------
# The lab kernel builds null_blk in; it makes no disk unless asked.
nulldisk=() nullappend=null_blk.nr_devices=0
if [ -n "${IDLETRACE_LAB_NULL_LATENCY_NS:-}" ]; then
	nulldrive="driver=null-co,read-zeroes=on,latency-ns=$IDLETRACE_LAB_NULL_LATENCY_NS,if=none,id=d2"
	case ${IDLETRACE_LAB_NULL_DISK:-nvme} in
	nvme) nulldisk=(-drive "$nulldrive" -device nvme,drive=d2,serial=lab-null) ;;
	virtio) nulldisk=(-object iothread,id=labnull -drive "$nulldrive" -device virtio-blk-pci,drive=d2,iothread=labnull,serial=lab-null) ;;
	# One submission queue per CPU, as an NVMe disk has: completions come
	# back to the issuing CPU.
	guest) nullappend="null_blk.nr_devices=1 null_blk.queue_mode=2 null_blk.irqmode=2 null_blk.completion_nsec=$IDLETRACE_LAB_NULL_LATENCY_NS null_blk.submit_queues=$CPUS" ;;
	*) die "IDLETRACE_LAB_NULL_DISK=${IDLETRACE_LAB_NULL_DISK}: want nvme, virtio or guest" ;;
	esac
fi
# One QEMU run; sets qrc and console.
boot() {
	: >"$WORK/stdout.log"
	: >"$WORK/stderr.log"
	: >"$WORK/console.log"
	quiet_log "booting $(basename "$vmlinuz") under QEMU TCG, $CPUS CPUs, profile $PROFILE, governor $GOVERNOR"
	# RDRAND (emulated by TCG from the host's getrandom) seeds the guest's
	# random number generator at boot: without it mke2fs and every Go program
	# blocked in getrandom until the kernel had made jitter entropy, 2-3 s of
	# both CPUs spinning in every run.
	timeout "$TIMEOUT" qemu-system-x86_64 -accel "tcg,thread=${IDLETRACE_LAB_TCG:-single}" -M pc -cpu qemu64,+rdrand -m "$MEM" -smp "$CPUS" \
		-kernel "$vmlinuz" -initrd "$WORK/initrd.cpio" \
		-append "console=ttyS0 panic=-1 quiet cpuidle.governor=$GOVERNOR $nullappend ${IDLETRACE_LAB_APPEND:-}" \
		-display none -monitor none -no-reboot \
		-serial "file:$WORK/console.log" -serial "file:$WORK/stdout.log" -serial "file:$WORK/stderr.log" \
		-drive "file=$WORK/data.img,if=none,format=raw,id=d0${IDLETRACE_LAB_DATA_OPTS:+,$IDLETRACE_LAB_DATA_OPTS}" -device nvme,drive=d0,serial=lab-data \
		-drive "file=$WORK/out.img,if=none,format=raw,id=d1" -device nvme,drive=d1,serial=lab-out \
		"${nulldisk[@]}" \
		</dev/null >"$WORK/qemu.log" 2>&1 &
	qpid=$!
	tail -n +1 -s 0.2 -f --pid=$qpid "$WORK/stdout.log" &
	t1=$!
	tail -n +1 -s 0.2 -f --pid=$qpid "$WORK/stderr.log" >&2 &
	t2=$!
	qrc=0
	wait $qpid || qrc=$?
	qpid=
	wait $t1 $t2 2>/dev/null || true
	console=$(tr -d '\r' <"$WORK/console.log")
}
boot
# A kernel that panicked before the lab's init ran (LAB-INIT) never reached
# the lab: under multi-threaded TCG, the guest's own code patching
# (sched_clock marking itself stable at ~1.7 s flips a static key in
# sched_clock_cpu) now and then faults on another vCPU (seen once in CI,
# "Fatal exception in interrupt" at sched_clock_cpu+0x9; 0 of 6 runs here).
# One more boot; the disks are as made, as init never mounted them.
if ! echo "$console" | grep -a -q '^LAB-INIT' && echo "$console" | grep -a -q 'Kernel panic'; then
	rip=$(echo "$console" | grep -a -m1 'RIP:' | sed 's/^\[[^]]*\] //' || true)
	log "the VM's kernel panicked while booting, before the lab's init ran: booting it again${rip:+ ($rip)}"
	boot
fi

if err=$(echo "$console" | grep -a -m1 '^LAB-ERROR=' | sed 's/^LAB-ERROR=//') && [ -n "$err" ]; then
	die "$err"
fi
ready=$(echo "$console" | grep -a -m1 '^LAB-READY' || true)
[ -n "$ready" ] && quiet_log "${ready#LAB-READY }"
status=$(echo "$console" | grep -a -m1 '^LAB-STATUS=' | sed 's/^LAB-STATUS=//' || true)
if [ -z "$status" ]; then
	[ $qrc = 124 ] && die "the VM ran longer than $TIMEOUT s (IDLETRACE_LAB_TIMEOUT) and was killed"
	echo "$console" | tail -15 >&2
	[ -z "$ready" ] && die "the VM did not boot (qemu status $qrc; its console ends above)"
	die "the VM stopped before COMMAND finished (qemu status $qrc; its console ends above)"
fi
if [ -n "$OUT" ]; then
	mkdir -p "$OUT"
	mkdir "$WORK/outx"
	debugfs -R "rdump /out $WORK/outx" "$WORK/out.img" >"$WORK/debugfs.log" 2>&1 || die "cannot copy /out from the VM's disk"
	cp -a "$WORK/outx/out/." "$OUT"/
fi
exit "$status"
