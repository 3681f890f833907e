#!/usr/bin/env bash
# The lab kernel (issue 9, item 2): Linux SERIES (IDLETRACE_LAB_SERIES: 6.12,
# the default and CI's, from bookworm's linux-source-6.12; 7.3, from
# trixie-backports' linux-source-7.3, whose teo is the 7.1 form; or 6.1,
# bookworm's own kernel source, whose teo is the form before 6.3), `make
# tinyconfig` plus lab/kernel/lab.config, with the patches in
# lab/kernel/SERIES/*.patch (the lab switches, off by default; 6.1 has
# none), built once
# and kept in the kernel cache next to the matrix's Debian kernels. Prints
# the kernel's directory on stdout (logs go to stderr):
#
#   DIR/boot/vmlinuz-RELEASE, DIR/boot/config-RELEASE  (as the matrix's
#                                     extracted Debian kernels have them)
#   DIR/src                           the configured, built tree: build
#                                     out-of-tree modules with
#                                     make -C DIR/src M=$PWD modules
#                                     (Module.symvers, scripts, vmlinux for
#                                     the modules' BTF are there)
#   DIR/build.txt                     key=value: release, package, how long
#                                     the cold build took, where, when
#   DIR/vmlinuz, DIR/config, DIR/build  links to the above, and
#   $CACHE/lab-kernel-SERIES          a link to the newest DIR of SERIES
#                                     reported (scripts/lab.sh --kernel lab
#                                     boots it)
#
# Usage: scripts/lab-kernel.sh [--cached]
#   --cached  only report: print DIR if the kernel is built, else exit 1
#
# Idempotent: DIR is named after the source package's version and a hash of
# the config fragment, the patches and RECIPE below, so a change to any of
# them builds a new kernel and an unchanged one is reused. The build runs in
# DIR.partial under nice -n 10 and is renamed to DIR when complete; a lock
# keeps two runs from building at once. Needs root only to install missing
# build tools (flex, bison, bc, libelf-dev, dwarves, gcc, make).
#
# Environment: IDLETRACE_KERNEL_CACHE (default /var/cache/idletrace-kernels),
# IDLETRACE_KERNEL_REFRESH=1 (look for a newer linux-source-SERIES), as for
# scripts/kernel-matrix.sh; IDLETRACE_LAB_SERIES (6.12).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

CACHED_ONLY=0
for a in "$@"; do
	case $a in
	--cached) CACHED_ONLY=1 ;;
	*) echo "usage: $0 [--cached]" >&2; exit 2 ;;
	esac
done

SERIES=${IDLETRACE_LAB_SERIES:-6.12}
[ -d "lab/kernel/$SERIES" ] || { echo "lab-kernel: no lab kernel for Linux $SERIES (lab/kernel/ has: $(cd lab/kernel && ls -d [0-9]* | tr '\n' ' '))" >&2; exit 2; }
# Bump when the build steps below change in a way that changes the result.
RECIPE=1
CACHE=${IDLETRACE_KERNEL_CACHE:-/var/cache/idletrace-kernels}
# shellcheck source=kernel-cache.sh
. scripts/kernel-cache.sh # apt_update, safe_rm, cached_debs
log() { echo "lab-kernel: $*" >&2; }

mkdir -p "$CACHE"
WORK=$(mktemp -d /var/tmp/idletrace-labkernel.XXXXXX)
trap 'safe_rm "$WORK"' EXIT

# apt and the cache's downloads are shared with scripts/lab.sh runs, which
# the lab's tests start while this builds: one at a time, under
# $CACHE/.lab.lock (held for the download and the tools only).
exec 8>"$CACHE/.lab.lock"
flock 8

# --- the source package (cached like the kernel packages) -------------------
srcdeb=$(cached_debs "linux-source-${SERIES}_*.deb" | tail -1) || true # (no match: status 1)
if [ $CACHED_ONLY = 0 ] && { [ -z "$srcdeb" ] || [ "${IDLETRACE_KERNEL_REFRESH:-}" = 1 ]; }; then
	apt_update
	pkg=linux-source-$SERIES
	# bookworm's, else trixie-backports' (kernel-cache.sh's own apt).
	apt=apt-get
	ver=$(apt-cache policy "$pkg" | awk '/Candidate:/ {print $2}')
	if [ -z "$ver" ] || [ "$ver" = "(none)" ]; then
		backports_update || exit 1
		apt=backports_apt
		ver=$(backports_apt_cache policy "$pkg" | awk '/Candidate:/ {print $2}')
	fi
	[ -n "$ver" ] && [ "$ver" != "(none)" ] || { log "apt knows no $pkg (in bookworm or $BACKPORTS_SUITE)"; exit 1; }
	if [ -z "$(cached_debs "${pkg}_${ver//:/%3a}_*.deb")" ]; then
		(cd "$WORK" && "$apt" download -q "$pkg=$ver" >/dev/null 2>&1) || { log "apt-get download $pkg=$ver failed"; exit 1; }
		log "downloaded $pkg $ver"
		mv "$WORK/${pkg}"_*.deb "$CACHE"/
	fi
	srcdeb=$(cached_debs "${pkg}_*.deb" | tail -1) || true
fi
flock -u 8
if [ -z "$srcdeb" ]; then
	log "no linux-source-$SERIES package in $CACHE"
	exit 1
fi
pkgver=${srcdeb#linux-source-"$SERIES"_}
pkgver=${pkgver%_*.deb}

hash=$( (
	echo "recipe=$RECIPE package=$srcdeb"
	for f in lab/kernel/lab.config lab/kernel/"$SERIES"/*.patch lab/kernel/"$SERIES"/config.sed; do
		# (a series without config.sed: skipped, not a failed loop under
		# pipefail)
		[ -f "$f" ] || continue
		echo "$f"
		cat "$f"
	done
) | sha256sum | cut -c1-12)
DIR=$CACHE/lab-$SERIES-${pkgver//[^A-Za-z0-9.+-]/_}-$hash

# The names scripts/lab.sh looks for: DIR/vmlinuz, DIR/config, DIR/build
# (the tree), and $CACHE/lab-kernel-SERIES pointing at the newest DIR of
# the series reported.
links() {
	local rel
	rel=$(sed -n 's/^release=//p' "$DIR/build.txt")
	[ -e "$DIR/vmlinuz" ] || ln -s "boot/vmlinuz-$rel" "$DIR/vmlinuz"
	[ -e "$DIR/config" ] || ln -s "boot/config-$rel" "$DIR/config"
	[ -e "$DIR/build" ] || ln -s src "$DIR/build"
	if [ "$(readlink "$CACHE/lab-kernel-$SERIES" 2>/dev/null)" != "${DIR##*/}" ]; then
		ln -sfn "${DIR##*/}" "$CACHE/.lab-kernel.$$" && mv -fT "$CACHE/.lab-kernel.$$" "$CACHE/lab-kernel-$SERIES"
	fi
}
report() {
	local s
	links
	s=$(sed -n 's/^cold_build_s=//p' "$DIR/build.txt")
	log "$(sed -n 's/^release=//p' "$DIR/build.txt") in $DIR (cold build: $((s / 60)) min $((s % 60)) s on $(sed -n 's/^built_on=//p' "$DIR/build.txt"))"
	echo "$DIR"
}
if [ -f "$DIR/.done" ]; then
	report
	exit 0
fi
[ $CACHED_ONLY = 1 ] && { log "not built: $DIR"; exit 1; }

exec 9>"$CACHE/.lab-kernel.lock"
if ! flock -n 9; then
	log "another build holds $CACHE/.lab-kernel.lock; waiting"
	flock 9
fi
if [ -f "$DIR/.done" ]; then # built while we waited
	report
	exit 0
fi

# --- tools ------------------------------------------------------------------
flock 8
need=()
for t in flex:flex bison:bison bc:bc pahole:dwarves gcc:gcc make:make patch:patch xz:xz-utils; do
	command -v "${t%%:*}" >/dev/null || need+=("${t#*:}")
done
[ -f /usr/include/libelf.h ] || [ -f /usr/include/gelf.h ] || need+=(libelf-dev)
if [ ${#need[@]} -gt 0 ]; then
	[ "$(id -u)" = 0 ] || { log "needs ${need[*]} (run as root to install them)"; exit 1; }
	log "installing ${need[*]}"
	apt_update
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
flock -u 8

# --- build --------------------------------------------------------------------
part=$DIR.partial
safe_rm "$part"
mkdir -p "$part"
t0=$(date +%s)
log "extracting $srcdeb"
dpkg-deb --fsys-tarfile "$CACHE/$srcdeb" | tar -xO "./usr/src/linux-source-$SERIES.tar.xz" | tar -xJ -C "$part"
mv "$part/linux-source-$SERIES" "$part/src"
src=$part/src
for p in lab/kernel/"$SERIES"/*.patch; do
	[ -f "$p" ] || continue
	log "applying $p"
	patch -d "$src" -p1 --forward --quiet <"$p" || { log "$p does not apply to $srcdeb"; exit 1; }
done

kmake() { nice -n 10 make -C "$src" ARCH=x86_64 "$@"; }
kmake -s tinyconfig >/dev/null
# The fragment under the series' option names (lab/kernel/SERIES/config.sed).
fragment=$WORK/lab.config
if [ -f "lab/kernel/$SERIES/config.sed" ]; then
	sed -f "lab/kernel/$SERIES/config.sed" lab/kernel/lab.config >"$fragment"
else
	cp lab/kernel/lab.config "$fragment"
fi
(cd "$src" && scripts/kconfig/merge_config.sh -m .config "$fragment" >"$WORK/merge.log" 2>&1) ||
	{ cat "$WORK/merge.log" >&2; exit 1; }
kmake -s olddefconfig >/dev/null
# Every line of the fragment must have survived (an unmet dependency drops
# an option silently).
bad=0
while IFS= read -r line; do
	case $line in
	CONFIG_*) opt=${line%%=*} ;;
	"# CONFIG_"*" is not set") opt=${line#\# } opt=${opt%% *} ;;
	*) continue ;;
	esac
	grep -qxF -- "$line" "$src/.config" || {
		log "config: wanted '$line', got: $(grep -E "^(# )?$opt[= ]" "$src/.config" || echo 'not set (missing dependency)')"
		bad=1
	}
done <"$fragment"
[ $bad = 0 ] || exit 1

log "building (nice -n 10, make -j$(nproc)); 9-10 min on 2 shared CPUs"
if ! kmake -j"$(nproc)" bzImage modules >"$part/build.log" 2>&1; then
	tail -30 "$part/build.log" >&2
	log "build failed; the log is $part/build.log"
	exit 1
fi
rel=$(cat "$src/include/config/kernel.release")
# Keep what out-of-tree module builds use (headers, .config, Module.symvers,
# scripts/ and tools/objtool, vmlinux for the modules' BTF) and drop the
# objects (about 1 GB): the tree is never rebuilt incrementally.
find "$src" \( -path "$src/scripts" -o -path "$src/tools" \) -prune -o -type f -name '*.o' -exec rm -f -- {} +
rm -f -- "$src"/.tmp_vmlinux*
mkdir -p "$part/boot"
cp "$src/arch/x86/boot/bzImage" "$part/boot/vmlinuz-$rel"
cp "$src/.config" "$part/boot/config-$rel"
t1=$(date +%s)
{
	echo "release=$rel"
	echo "package=${srcdeb%.deb}"
	echo "recipe=$RECIPE"
	echo "cold_build_s=$((t1 - t0))"
	echo "built_on=$(nproc) CPUs, $(uname -r), $(date -u +%Y-%m-%d)"
	echo "gcc=$(gcc -dumpfullversion)"
	echo "pahole=$(pahole --version)"
} >"$part/build.txt"
gzip -9 "$part/build.log"
touch "$part/.done"
[ ! -e "$DIR" ] || safe_rm "$DIR" # an incomplete one (no .done) left by hand
mv -T "$part" "$DIR"
report
