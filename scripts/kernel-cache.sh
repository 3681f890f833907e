# The kernel matrix's package cache: finding, downloading and extracting
# Debian's cloud kernels. Sourced by scripts/kernel-matrix.sh (and by the
# tests in scripts/matrixreport); bash. The caller sets:
#
#   CACHE  the cache directory (IDLETRACE_KERNEL_CACHE)
#   WORK   a scratch directory of its own (mktemp -d)
#   ROOT   the repository
#
# Package names hold characters that are regex operators
# (linux-image-6.12.117+deb12-cloud-amd64-unsigned): files are found with
# shell globs on the literal name, never with grep -E on it. Every rm -rf goes
# through safe_rm, which refuses the cache itself, its parents, the repository
# and empty paths.

log() { echo "kernel-matrix: $*" >&2; }

apt_updated=0
apt_update() { [ $apt_updated = 1 ] || { apt-get update -qq && apt_updated=1; }; }

# safe_rm DIR: rm -rf DIR, unless DIR is empty, /, the cache or one of its
# parents, the repository or one of its parents, or $HOME. Returns 1 (and
# removes nothing) when it refuses.
safe_rm() {
	local p c r
	if [ -z "${1:-}" ]; then
		log "refusing to rm -rf an empty path"
		return 1
	fi
	p=$(realpath -m -- "$1")
	c=$(realpath -m -- "${CACHE:?}")
	r=$(realpath -m -- "${ROOT:-/}")
	case "$c/" in "$p"/*)
		log "refusing to rm -rf $1: it is the kernel cache $CACHE or holds it"
		return 1
		;;
	esac
	case "$r/" in "$p"/*)
		log "refusing to rm -rf $1: it is the repository or holds it"
		return 1
		;;
	esac
	if [ "$p" = / ] || [ "$p" = "$(realpath -m -- "${HOME:-/}")" ]; then
		log "refusing to rm -rf $1"
		return 1
	fi
	rm -rf -- "$p"
}

# cached_debs GLOB: the names of the cache's files matching GLOB (a shell
# pattern relative to the cache), oldest version first.
cached_debs() {
	local f
	for f in "$CACHE"/$1; do
		[ -f "$f" ] && echo "${f##*/}"
	done | sort -V
}

# kernel_deb SERIES: the path of the newest cached package of that series,
# downloading the newest one apt knows when none is cached (or on refresh).
kernel_deb() {
	local s=$1 pkg deb
	# The series as a glob: 6.1 must not match 6.12 (hence the [.-]).
	deb=$(cached_debs "linux-image-${s}[.-]*-cloud-amd64-unsigned_*.deb" | tail -1)
	if [ -z "$deb" ] || [ "${IDLETRACE_KERNEL_REFRESH:-}" = 1 ]; then
		apt_update
		# apt-cache takes a regex: the series' dots are escaped.
		pkg=$(apt-cache search --names-only "^linux-image-${s//./\\.}[.-][^ ]*-cloud-amd64-unsigned\$" | awk '{print $1}' | sort -V | tail -1)
		[ -n "$pkg" ] || { log "no Debian package for kernel $s"; return 1; }
		if [ -z "$(cached_debs "${pkg}_*.deb")" ]; then
			log "downloading $pkg"
			(cd "$WORK" && apt-get download -q "$pkg" >/dev/null 2>&1) || { log "apt-get download $pkg failed"; return 1; }
			mv "$WORK/${pkg}"_*.deb "$CACHE"/ || { log "apt-get download $pkg left no ${pkg}_*.deb"; return 1; }
		fi
		deb=$(cached_debs "${pkg}_*.deb" | tail -1)
	fi
	if [ -z "$deb" ] || [ ! -f "$CACHE/$deb" ]; then
		log "no package for kernel $s in $CACHE"
		return 1
	fi
	echo "$CACHE/$deb"
}

# kernel_dir DEB: its /boot (vmlinuz, config), extracted once next to it, in a
# directory named after the package file without .deb.
kernel_dir() {
	local deb=$1 dir
	case "$deb" in
	"$CACHE"/?*.deb) ;;
	*)
		log "kernel_dir: $deb is not a package file in $CACHE"
		return 1
		;;
	esac
	[ -f "$deb" ] || { log "kernel_dir: no file $deb"; return 1; }
	dir=${deb%.deb}
	if [ ! -f "$dir/.done" ]; then
		safe_rm "$dir" || return 1
		mkdir -p "$dir"
		dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dir" ./boot || { log "extracting $deb failed"; return 1; }
		ls "$dir"/boot/vmlinuz-* >/dev/null 2>&1 || { log "$deb has no /boot/vmlinuz-*"; return 1; }
		touch "$dir/.done"
	fi
	echo "$dir"
}
