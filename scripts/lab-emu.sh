# The lab's emulated cpuidle driver (lab/idle_emu) built for a kernel: the
# kernel's Debian headers fetched into the kernel cache, and the module built
# once per kernel and source. Sourced by scripts/lab.sh after
# scripts/kernel-cache.sh (log, apt_update, safe_rm, kernel_deb, kernel_dir);
# bash. The caller sets CACHE, WORK and ROOT as kernel-cache.sh asks.
#
# Cache layout (next to the kernel packages):
#   linux-headers-<abi>_<ver>_amd64.deb, linux-headers-<flavourless abi>-common_<ver>_all.deb,
#   linux-kbuild-<series>_<ver>_amd64.deb        the packages, as apt-get download names them
#   headers-<abi>_<ver>/                         the three unpacked (dpkg -x) into one root;
#                                                usr/src/linux-headers-<abi> is the build dir
#   idle_emu/<kernelrelease>-<source hash>/idle_emu.ko   built modules

# cache_pkg NAME VERSION: the cached package file of NAME at VERSION,
# downloaded when missing. Prints its path.
cache_pkg() {
	local name=$1 ver=$2 f
	for f in "$CACHE/${name}_${ver//:/%3a}_"*.deb; do
		[ -f "$f" ] && { echo "$f"; return 0; }
	done
	log "downloading $name $ver"
	if ! (cd "$WORK" && apt-get download -q "$name=$ver" >/dev/null 2>&1); then
		apt_update
		(cd "$WORK" && apt-get download -q "$name=$ver" >/dev/null 2>&1) || { log "apt-get download $name=$ver failed"; return 1; }
	fi
	for f in "$WORK/${name}_"*.deb; do
		[ -f "$f" ] || continue
		mv "$f" "$CACHE"/ && echo "$CACHE/${f##*/}" && return 0
	done
	log "apt-get download $name=$ver left no ${name}_*.deb"
	return 1
}

# headers_dir IMAGE_DEB: the kernel build directory (Debian's
# linux-headers-<abi>, with its -common and linux-kbuild packages unpacked
# beside it) for the kernel package IMAGE_DEB from kernel_deb. Prints it.
headers_dir() {
	local deb=$1 base pkg ver abi hdeb dir deps d name
	base=${deb##*/}
	pkg=${base%%_*}
	ver=${base#*_}
	ver=${ver%_*}
	abi=${pkg#linux-image-}
	abi=${abi%-unsigned}
	dir=$CACHE/headers-${abi}_${ver}
	if [ ! -f "$dir/.done" ]; then
		hdeb=$(cache_pkg "linux-headers-$abi" "$ver") || return 1
		safe_rm "$dir" || return 1
		mkdir -p "$dir"
		dpkg -x "$hdeb" "$dir" || { log "unpacking $hdeb failed"; return 1; }
		# The -common and linux-kbuild packages it depends on, at the versions
		# it names (linux-kbuild-6.1 (>= 6.1.192-3): the same version).
		deps=$(dpkg-deb -f "$hdeb" Depends | tr ',' '\n' | sed -E 's/^ +//')
		for name in $(echo "$deps" | awk '$1 ~ /^linux-(headers-.*-common|kbuild-)/ {print $1}'); do
			d=$(cache_pkg "$name" "$ver") || return 1
			dpkg -x "$d" "$dir" || { log "unpacking $d failed"; return 1; }
		done
		# The flavour's Makefile includes the -common tree by its absolute
		# /usr/src path; point it into this root (the scripts/ and tools/
		# symlinks are relative already).
		sed -i "s|^include /usr/src/|include $dir/usr/src/|" "$dir/usr/src/linux-headers-$abi/Makefile"
		[ -e "$dir/usr/src/linux-headers-$abi/scripts/Makefile.build" ] || { log "headers for $abi: no kbuild scripts"; return 1; }
		touch "$dir/.done"
	fi
	echo "$dir/usr/src/linux-headers-$abi"
}

# emu_module BUILD_DIR: lab/idle_emu built against BUILD_DIR (a kernel tree
# or Debian headers directory where `make M=` builds modules), cached by the
# kernel release and a hash of the module's source and of the tree's own
# path (a lab kernel rebuilt with another config keeps its release but
# gets a new directory, and a module built against the old one fails its
# BTF check at insmod). Prints the .ko's path.
emu_module() {
	local kb=$1 krel hash out b
	# Debian's headers name the release in .kernelvariables (their make
	# kernelrelease gives the -common tree's 6.1.192); a kernel tree by make.
	krel=$(sed -n 's/^override KERNELRELEASE = //p' "$kb/.kernelvariables" 2>/dev/null || true)
	[ -n "$krel" ] || krel=$(make -s -C "$kb" kernelrelease 2>/dev/null) || krel=
	[ -n "$krel" ] || { log "cannot tell the kernel release of $kb"; return 1; }
	hash=$(cat "$ROOT"/lab/idle_emu/idle_emu.c "$ROOT"/lab/idle_emu/Kbuild <(realpath "$kb") | sha256sum | cut -c1-12)
	out=$CACHE/idle_emu/$krel-$hash
	if [ ! -f "$out/idle_emu.ko" ]; then
		command -v pahole >/dev/null || {
			log "installing dwarves (pahole, for the module's BTF)"
			apt_update
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dwarves >/dev/null
		}
		b=$WORK/idle_emu-build
		mkdir -p "$b"
		cp "$ROOT"/lab/idle_emu/idle_emu.c "$ROOT"/lab/idle_emu/Kbuild "$b"/
		log "building idle_emu.ko for $krel"
		if ! make -s -C "$kb" M="$b" modules >"$b/build.log" 2>&1 || [ ! -f "$b/idle_emu.ko" ]; then
			log "building idle_emu.ko for $krel failed:"
			tail -20 "$b/build.log" >&2
			return 1
		fi
		mkdir -p "$out"
		cp "$b/idle_emu.ko" "$b/build.log" "$out"/
	fi
	echo "$out/idle_emu.ko"
}
