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

# Kernels newer than bookworm's (7.3) come from trixie-backports, through
# an apt of their own: its sources list, lists and cache under
# $CACHE/apt-trixie-backports, so the host's apt sources are left as they
# are. apt checks the suite's InRelease against debian-archive-keyring (the
# bookworm package carries trixie's keys) as it does bookworm's.
BACKPORTS_SUITE=trixie-backports
backports_apt_dir() { echo "$CACHE/apt-$BACKPORTS_SUITE"; }
# backports_apt_args sets apt_args to that configuration's options, each one
# word whatever the cache's path; backports_apt ARGS and backports_apt_cache
# ARGS are apt-get and apt-cache with them.
backports_apt_args() {
	local d
	d=$(backports_apt_dir)
	apt_args=(-o "Dir::Etc::SourceList=$d/sources.list" -o "Dir::Etc::SourceParts=$d/empty"
		-o Dir::Etc::Preferences=/dev/null -o "Dir::Etc::PreferencesParts=$d/empty"
		-o "Dir::State::Lists=$d/lists" -o "Dir::Cache=$d/cache" -o APT::Sandbox::User=root)
}
backports_apt() {
	local apt_args
	backports_apt_args
	apt-get "${apt_args[@]}" "$@"
}
backports_apt_cache() {
	local apt_args
	backports_apt_args
	apt-cache "${apt_args[@]}" "$@"
}
backports_updated=0
backports_update() {
	local d
	[ $backports_updated = 1 ] && return 0
	d=$(backports_apt_dir)
	mkdir -p "$d/lists/partial" "$d/cache/archives/partial" "$d/empty"
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $BACKPORTS_SUITE main" >"$d/sources.list"
	backports_apt update -qq || { log "apt-get update of $BACKPORTS_SUITE failed"; return 1; }
	backports_updated=1
}

# download_pkg APT PKG[=VERSION]: APT download PKG (APT: apt-get, or
# backports_apt) into the cache, unless a file of it is there.
download_pkg() {
	local apt=$1 pkg=${2%%=*}
	[ -n "$(cached_debs "${pkg}_*.deb")" ] && return 0
	log "downloading $2"
	(cd "$WORK" && "$apt" download -q "$2" >/dev/null 2>&1) || { log "apt-get download $2 failed"; return 1; }
	mv "$WORK/${pkg}"_*.deb "$CACHE"/ || { log "apt-get download $2 left no ${pkg}_*.deb"; return 1; }
}

# kernel_deb SERIES: the path of the newest cached package of that series
# that holds its vmlinuz, downloading the newest one apt knows when none is
# cached (or on refresh). Bookworm's kernels (6.1, 6.12) are one package,
# linux-image-ABI-cloud-amd64-unsigned with /boot; trixie-backports' (7.x)
# are split: linux-binary-ABI-cloud-amd64 holds
# /usr/lib/modules/ABI/vmlinuz, linux-base-ABI-cloud-amd64 its config, and
# a linux-binary counts as cached only beside its linux-base of the same
# file name (kernel_dir takes the second from the first's name).
kernel_deb() {
	local s=$1 pkg deb
	# The series as a glob: 6.1 must not match 6.12 (hence the [.-]).
	deb=$(cached_debs "linux-image-${s}[.-]*-cloud-amd64-unsigned_*.deb" | tail -1) || true # (no match: status 1)
	if [ -z "$deb" ]; then
		deb=$(cached_debs "linux-binary-${s}[.-]*-cloud-amd64_*.deb" | tail -1) || true
		[ -z "$deb" ] || [ -f "$CACHE/linux-base-${deb#linux-binary-}" ] || deb=
	fi
	if [ -z "$deb" ] || [ "${IDLETRACE_KERNEL_REFRESH:-}" = 1 ]; then
		apt_update
		# apt-cache takes a regex: the series' dots are escaped.
		pkg=$(apt-cache search --names-only "^linux-image-${s//./\\.}[.-][^ ]*-cloud-amd64-unsigned\$" | awk '{print $1}' | sort -V | tail -1)
		if [ -n "$pkg" ]; then
			download_pkg apt-get "$pkg" || return 1
		else
			backports_update || return 1
			pkg=$(backports_apt_cache search --names-only "^linux-binary-${s//./\\.}[.-][^ ]*-cloud-amd64\$" | awk '{print $1}' | sort -V | tail -1)
			[ -n "$pkg" ] || { log "no Debian package for kernel $s (in bookworm or $BACKPORTS_SUITE)"; return 1; }
			download_pkg backports_apt "$pkg" || return 1
			download_pkg backports_apt "linux-base-${pkg#linux-binary-}" || return 1
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
# directory named after the package file without .deb. A linux-binary
# package's vmlinuz and its linux-base's config (same version) are put in
# that directory's boot/ under the names bookworm's packages give them.
kernel_dir() {
	local deb=$1 dir base basedeb rel
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
		base=${deb##*/}
		case "$base" in
		linux-binary-*)
			basedeb=$CACHE/linux-base-${base#linux-binary-}
			[ -f "$basedeb" ] || { log "kernel_dir: no ${basedeb##*/} beside $base (its config)"; return 1; }
			mkdir -p "$dir/x" "$dir/boot"
			{ dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dir/x" ./usr/lib/modules &&
				dpkg-deb --fsys-tarfile "$basedeb" | tar -x -C "$dir/x" ./usr/lib/modules; } || { log "extracting $deb failed"; return 1; }
			for rel in "$dir"/x/usr/lib/modules/*/vmlinuz; do
				rel=${rel%/vmlinuz}
				rel=${rel##*/}
				mv "$dir/x/usr/lib/modules/$rel/vmlinuz" "$dir/boot/vmlinuz-$rel" &&
					mv "$dir/x/usr/lib/modules/$rel/config" "$dir/boot/config-$rel" || { log "$base or ${basedeb##*/} lacks vmlinuz or config for $rel"; return 1; }
			done
			safe_rm "$dir/x"
			;;
		*)
			dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dir" ./boot || { log "extracting $deb failed"; return 1; }
			;;
		esac
		ls "$dir"/boot/vmlinuz-* >/dev/null 2>&1 || { log "$deb has no vmlinuz"; return 1; }
		touch "$dir/.done"
	fi
	echo "$dir"
}
