#!/usr/bin/env bash
# build.sh builds the rxe lab's guest image (kernel + initramfs) from
# Debian's own packages, or finds it already built, and prints the image
# directory as the last line of its standard output.
#
# Everything it fetches comes through apt-get (apt-get download + dpkg -x);
# nothing is downloaded any other way. The build lives outside the
# repository, in $UROCE_LAB_CACHE (default: ${XDG_CACHE_HOME:-$HOME/.cache}/uroce-lab),
# keyed by the exact versions of every package that goes in and by the
# contents of this script and the guest's init: when none of them changed,
# the script only resolves versions (a second or two) and prints the
# existing directory.
#
# Usage: build.sh [-q] [FLAVOUR]   (-q: print only the image directory)
#
# FLAVOUR (or $UROCE_LAB_FLAVOUR when no argument names one) is the Debian
# release the guest is made of:
#   bookworm  Debian 12: kernel 6.1, rdma-core 44, perftest 4.5 (the default),
#             from the host's own apt configuration
#   trixie    Debian 13: kernel 6.12, rdma-core 56, perftest 25.01, from a
#             private apt configuration under $UROCE_LAB_CACHE/apt/trixie
#             (its own sources list, package lists and cache), so that the
#             host's apt state is never touched
#   trixie-backports
#             trixie's user space with trixie-backports' kernel (7.x), the
#             first whose virtio-net does AF_XDP zero-copy; ethtool too,
#             to set the NIC's queues
#
# The image directory holds:
#   vmlinuz        Debian's kernel (linux-image-amd64's ABI package)
#   vmlinux        the same kernel unpacked from vmlinuz, for PVH direct boot
#   initrd.gz      busybox, rdma-core, perftest, iproute2, modules, /init
#   manifest.txt   package versions, kernel release, module load order
set -euo pipefail
umask 022
export LC_ALL=C DEBIAN_FRONTEND=noninteractive

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${UROCE_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/uroce-lab}
args=("$@")
quiet=0
flavour=${UROCE_LAB_FLAVOUR:-}
for a in "$@"; do
	case $a in
	-q) quiet=1 ;;
	-*) echo "usage: build.sh [-q] [bookworm|trixie|trixie-backports]" >&2; exit 2 ;;
	*) flavour=$a ;;
	esac
done
flavour=${flavour:-bookworm}
usrmerged=0 # 1: the packages ship everything under /usr

log() { [ $quiet = 1 ] || echo "lab-build: $*" >&2; }
die() { echo "lab-build: error: $*" >&2; exit 1; }

# APT: the options every apt-get and apt-cache call below is given. The
# host's own configuration serves bookworm; trixie gets a private one:
# sources, preferences, lists and cache of its own, and no installed
# packages (the host is bookworm, and its status would only confuse the
# resolver), so nothing apt keeps for the host is read or written.
APT=()
apt_lists=/var/lib/apt/lists
suites=$flavour
case $flavour in
bookworm) ;;
trixie | trixie-backports)
	# Backports' packages have priority 100, so only the kernel, pinned
	# below, comes from there; the rest is trixie's.
	[ $flavour = trixie ] || suites="trixie trixie-backports"
	usrmerged=1
	keyring=/usr/share/keyrings/debian-archive-keyring.gpg
	[ -r "$keyring" ] || die "no $keyring (package debian-archive-keyring)"
	adir=$cache/apt/$flavour
	apt_lists=$adir/lists
	APT=(-o "Dir::Etc::SourceList=$adir/etc/sources.list"
		-o "Dir::Etc::SourceParts=$adir/etc/sources.list.d"
		-o "Dir::Etc::Preferences=$adir/etc/preferences"
		-o "Dir::Etc::PreferencesParts=$adir/etc/preferences.d"
		-o "Dir::State::Lists=$apt_lists"
		-o "Dir::Cache=$adir/cache"
		-o "Dir::State::status=/dev/null"
		-o "APT::Sandbox::User=root")
	;;
*) die "unknown flavour $flavour (bookworm, trixie or trixie-backports)" ;;
esac

# User-space packages the guest runs; their dependency closure is resolved
# by apt below, never listed by hand.
USER_PKGS=(busybox-static libibverbs1 ibverbs-providers librdmacm1 ibverbs-utils perftest rdmacm-utils iproute2)
# Packages whose executables go into the guest (libraries come from the
# closure as the executables need them)...
TOOL_PKGS=(busybox-static ibverbs-utils perftest rdmacm-utils iproute2)
# ...except iproute2's, of which only these: the rest (ss, tc, arpd) would
# bring Kerberos, Berkeley DB and xtables into the initramfs for nothing.
IPROUTE2_TOOLS="ip rdma bridge nstat"
# Kernel modules the guest loads, each with its modules.dep closure, in
# dependency order. crc32_generic is not in any module's modules.dep line
# (rdma_rxe asks the crypto API for "crc32" at run time), so it is named.
# 8021q is for the VLAN cells (Guest.AddVLAN); the host's kernel lacks it.
MODULES=(crc32_generic virtio_pci virtio_net 9pnet_virtio 9p udp_tunnel ip6_udp_tunnel
	ib_core ib_uverbs rdma_rxe ib_cm iw_cm rdma_cm rdma_ucm ib_umad 8021q)
# Modules a kernel may lack without harm: rxe on 6.15 and later calls the
# crc32 library, and crc32_generic is gone.
OPTIONAL_MODULES=" crc32_generic "
if [ $flavour = trixie-backports ]; then
	USER_PKGS+=(ethtool)
	TOOL_PKGS+=(ethtool)
fi
# Host tools the lab needs, by Debian package.
HOST_TOOLS=(qemu-system-x86_64:qemu-system-x86 nft:nftables cpio:cpio readelf:binutils
	xz:xz-utils zstd:zstd dpkg-deb:dpkg flock:util-linux depmod:kmod ip:iproute2)

updated=0
apt_update() {
	[ $updated = 1 ] && return 0
	log "apt-get update ($flavour)"
	apt-get "${APT[@]}" update -qq >&2 || die "apt-get update ($flavour) failed"
	updated=1
}

# Host tools first: the lab is unusable without them even when cached.
missing=()
for t in "${HOST_TOOLS[@]}"; do
	command -v "${t%%:*}" >/dev/null 2>&1 || missing+=("${t#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
	[ "$(id -u)" = 0 ] || die "missing host tools (${missing[*]}); install them as root"
	log "apt-get update (host)"
	apt-get update -qq >&2 || die "apt-get update failed"
	log "apt-get install ${missing[*]}"
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 || die "apt-get install ${missing[*]}"
fi

mkdir -p "$cache"/{debs,extract,images}
exec 9>"$cache/.lock"
flock 9 # one build at a time, whichever process asks

if [ -n "${adir:-}" ]; then
	mkdir -p "$adir"/etc/sources.list.d "$adir"/etc/preferences.d "$apt_lists"/partial "$adir"/cache/archives/partial
	: >"$adir/etc/sources.list"
	cat >"$adir/etc/sources.list.d/$flavour.sources" <<-EOF
		Types: deb
		URIs: http://deb.debian.org/debian
		Suites: $suites
		Components: main
		Signed-By: $keyring
	EOF
	if [ $flavour = trixie-backports ]; then
		cat >"$adir/etc/preferences.d/kernel.pref" <<-EOF
			Package: linux-image-*
			Pin: release n=trixie-backports
			Pin-Priority: 600
		EOF
	fi
fi

# Resolving versions costs a few seconds of apt; its answer can only
# change when the package lists or this script do, so it is remembered
# under a stamp of both.
lists_stamp=$( {
	echo "$flavour"
	ls -l --time-style=+%s.%N "$apt_lists/" 2>/dev/null
	sha256sum "$here/build.sh" "$here/guest/init"
} | sha256sum | cut -c1-16)
if [ -f "$cache/resolved/$lists_stamp" ]; then
	img="$cache/images/$(cat "$cache/resolved/$lists_stamp")"
	if [ -f "$img/READY" ]; then
		log "cached: $img"
		touch "$img"
		echo "$img"
		exit 0
	fi
fi

candidate() { apt-cache "${APT[@]}" policy "$1" 2>/dev/null | awk '/Candidate:/{print $2; exit}'; }

# The kernel: whatever ABI package linux-image-amd64 (6.1 in Debian 12,
# 6.12 in Debian 13) depends on in its candidate version.
kmeta=$(candidate linux-image-amd64)
if [ -z "$kmeta" ] || [ "$kmeta" = "(none)" ]; then
	apt_update
	kmeta=$(candidate linux-image-amd64)
fi
[ -n "$kmeta" ] && [ "$kmeta" != "(none)" ] || die "no candidate for linux-image-amd64"
kpkg=$(apt-cache "${APT[@]}" show "linux-image-amd64=$kmeta" | awk -F': ' '/^Depends:/{print $2; exit}' |
	tr ',' '\n' | sed 's/ *(.*//; s/^ *//' | grep '^linux-image-[0-9].*-amd64$' | head -n1)
[ -n "$kpkg" ] || die "cannot tell which kernel linux-image-amd64 $kmeta depends on"
kver=$(candidate "$kpkg")

# The user-space closure: ask apt to plan an install on an empty system,
# so every dependency (pre-depends included) shows up with its version.
closure() {
	apt-get "${APT[@]}" -s install --no-install-recommends -o Dir::State::status=/dev/null \
		-o APT::Get::Show-User-Simulation-Note=false "${USER_PKGS[@]}" 2>&1 |
		awk '/^Inst /{v=$3; gsub(/[()]/, "", v); print $2 "=" v}' | sort
}
pkgs=$(closure)
[ -n "$pkgs" ] || { apt_update; pkgs=$(closure); }
[ -n "$pkgs" ] || die "cannot resolve the closure of ${USER_PKGS[*]}"

key=$( {
	echo "flavour $flavour"
	echo "$kpkg=$kver"
	echo "$pkgs"
	echo "modules: ${MODULES[*]}"
	sha256sum "$here/build.sh" "$here/guest/init" | awk '{print $1}'
} | sha256sum | cut -c1-16)
img="$cache/images/$key"
remember() { mkdir -p "$cache/resolved" && echo "$key" >"$cache/resolved/$lists_stamp"; }
if [ -f "$img/READY" ]; then
	log "cached: $img"
	touch "$img" # in use: keeps it from the pruning below
	remember
	echo "$img"
	exit 0
fi
log "building $img ($kpkg $kver; $(echo "$pkgs" | wc -l) user-space packages)"

# debpath NAME=VERSION prints the cached .deb of that version, if any.
debpath() {
	local name=${1%%=*} ver=${1#*=}
	ls "$cache/debs/${name}_${ver//:/%3a}_"*.deb 2>/dev/null | head -n1
}

# download NAME=VERSION...: fetch the missing ones in one apt-get call.
download() {
	local p want=()
	for p in "$@"; do
		[ -n "$(debpath "$p")" ] || want+=("$p")
	done
	[ ${#want[@]} -gt 0 ] || return 0
	log "apt-get download ${want[*]}"
	(cd "$cache/debs" && apt-get "${APT[@]}" download -qq -o APT::Sandbox::User=root "${want[@]}" >&2) && return 0
	# Stale package lists name versions the archive no longer has: update
	# them and start over, which resolves (and keys) the build anew.
	[ -z "${UROCE_LAB_RETRIED:-}" ] || die "apt-get download ${want[*]}"
	apt_update
	log "starting over with fresh package lists"
	exec env UROCE_LAB_RETRIED=1 bash "$here/build.sh" "${args[@]}"
}

# deb_of NAME=VERSION prints the path of that package's .deb, which
# download must have fetched (download is not called here: it may start
# the script over, which must not happen inside a command substitution).
deb_of() {
	local f
	f=$(debpath "$1")
	[ -n "$f" ] || die "$1 was not downloaded"
	echo "$f"
}

# Kernel package: extracted once per version (about 400 MB unpacked).
kdir="$cache/extract/${kpkg}_${kver}"
if [ ! -f "$kdir/.done" ]; then
	download "$kpkg=$kver"
	kdeb=$(deb_of "$kpkg=$kver")
	# From 7.x on, linux-image-RELEASE is only a name: the kernel is in
	# linux-binary-RELEASE, its modules in linux-modules-RELEASE and
	# modules.builtin in linux-base-RELEASE.
	kparts=$(dpkg-deb -f "$kdeb" Depends | tr ',' '\n' | sed 's/ *(.*//; s/^ *//' |
		awk -v r="${kpkg#linux-image-}" -v v="$kver" '$0 == "linux-base-" r || $0 == "linux-binary-" r || $0 == "linux-modules-" r {print $0 "=" v}')
	[ -z "$kparts" ] || download $kparts
	rm -rf "$kdir"
	for p in "$kpkg=$kver" $kparts; do
		log "dpkg -x $(basename "$(deb_of "$p")")"
		dpkg -x "$(deb_of "$p")" "$kdir"
	done
	# Debian 13 ships modules under /usr/lib/modules (usr-merge); the
	# host's depmod and this script look under /lib/modules.
	if [ ! -e "$kdir/lib" ] && [ -d "$kdir/usr/lib/modules" ]; then
		ln -s usr/lib "$kdir/lib"
	fi
	# The package leaves modules.dep to its postinst (depmod).
	depmod -b "$kdir" "${kpkg#linux-image-}" || die "depmod"
	touch "$kdir/.done"
fi
krel=${kpkg#linux-image-}
moddir="$kdir/lib/modules/$krel"
[ -f "$moddir/modules.dep" ] || die "no modules.dep in $moddir"
vmlinuz="$kdir/boot/vmlinuz-$krel"
[ -f "$vmlinuz" ] || vmlinuz="$moddir/vmlinuz" # linux-binary's place for it
[ -f "$vmlinuz" ] || die "no vmlinuz in $kdir/boot or $moddir"

# User space: every package of the closure extracted into one tree.
udir="$cache/extract/user-$(echo "$pkgs" | sha256sum | cut -c1-16)"
download $pkgs
if [ ! -f "$udir/.done" ]; then
	rm -rf "$udir"
	mkdir -p "$udir"
	for p in $pkgs; do
		dpkg -x "$(deb_of "$p")" "$udir"
	done
	# Debian 13's packages are usr-merged: what they ship is under /usr,
	# and /bin, /sbin, /lib and /lib64 are links into it (made on a real
	# system by base-files). Make the same links here, folding in what a
	# package still ships under the old paths, so that the old paths
	# (PT_INTERP's /lib64, /bin/busybox) resolve.
	if [ $usrmerged = 1 ]; then
		for d in bin sbin lib lib64; do
			mkdir -p "$udir/usr/$d"
			if [ -d "$udir/$d" ] && [ ! -L "$udir/$d" ]; then
				cp -a "$udir/$d/." "$udir/usr/$d/"
				rm -rf "${udir:?}/$d"
			fi
			[ -L "$udir/$d" ] || ln -s "usr/$d" "$udir/$d"
		done
	fi
	touch "$udir/.done"
fi

work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
root="$work/root"
mkdir -p "$root"/{usr/bin,usr/sbin,etc,proc,sys,dev,tmp,run,lab,root,var/run}
if [ $usrmerged = 1 ]; then
	# The same links as in the user-space tree above.
	for d in bin sbin lib lib64; do
		mkdir -p "$root/usr/$d"
		ln -s "usr/$d" "$root/$d"
	done
else
	mkdir -p "$root"/{bin,sbin,lib64}
fi

# copy PATH (relative to the user-space tree) into the initramfs, keeping
# symlinks as symlinks and bringing along what they point to.
copy() {
	local rel=${1#/} src dst target
	src="$udir/$rel"
	dst="$root/$rel"
	[ -e "$dst" ] || [ -L "$dst" ] && return 0
	mkdir -p "$(dirname "$dst")"
	if [ -L "$src" ]; then
		target=$(readlink "$src")
		ln -s "$target" "$dst"
		case $target in
		/*) copy "$target" ;;
		*) copy "$(dirname "$rel")/$target" ;;
		esac
	elif [ -f "$src" ]; then
		cp -p "$src" "$dst"
	else
		die "$rel is not in the user-space packages"
	fi
}

# find_lib SONAME: the path of that library in the user-space tree.
libdirs=(lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu lib64 lib usr/lib)
find_lib() {
	local d
	for d in "${libdirs[@]}"; do
		if [ -e "$udir/$d/$1" ]; then
			echo "$d/$1"
			return 0
		fi
	done
	return 1
}

# add_elf PATH: copy an ELF file and, recursively, every library it needs.
declare -A seen=()
add_elf() {
	local rel=${1#/} lib path
	[ -n "${seen[$rel]:-}" ] && return 0
	seen[$rel]=1
	copy "$rel"
	for lib in $(readelf -d "$udir/$rel" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
		path=$(find_lib "$lib") || die "$rel needs $lib, which no package of the closure has"
		add_elf "$path"
	done
}

is_elf() { [ "$(head -c4 "$1" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ]; }

# The dynamic loader the executables name (PT_INTERP).
copy lib64/ld-linux-x86-64.so.2

# Executables of the tool packages.
for p in "${TOOL_PKGS[@]}"; do
	v=$(echo "$pkgs" | awk -F= -v p="$p" '$1==p{print $2}')
	for f in $(dpkg-deb -c "$(deb_of "$p=$v")" | awk '{print $6}' |
		grep -E '^\./(usr/)?s?bin/[^/]+$' | sed 's|^\./||'); do
		if [ "$p" = iproute2 ] && ! [[ " $IPROUTE2_TOOLS " == *" $(basename "$f") "* ]]; then
			continue
		fi
		if [ -L "$udir/$f" ]; then
			copy "$f"
		elif is_elf "$udir/$f"; then
			add_elf "$f"
		fi
	done
done

# libibverbs finds its providers through /etc/libibverbs.d and dlopens them
# (rxe's among them), so readelf cannot see that need.
for f in $(cd "$udir" && ls etc/libibverbs.d/*.driver usr/lib/x86_64-linux-gnu/libibverbs/*.so 2>/dev/null); do
	if is_elf "$udir/$f"; then add_elf "$f"; else copy "$f"; fi
done
# glibc dlopens libgcc_s when a thread ends with pthread_exit (rping's CQ
# thread does); without it the process aborts at exit and loses its
# buffered stdout.
gcc_s=$(find_lib libgcc_s.so.1) || die "no libgcc_s.so.1 in the closure (libgcc-s1)"
add_elf "$gcc_s"
[ -e "$root/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so" ] ||
	ls "$root"/usr/lib/x86_64-linux-gnu/libibverbs/librxe-*.so >/dev/null 2>&1 ||
	die "no rxe provider in ibverbs-providers"
# iproute2's tables (ip reads them for names; harmless when absent, but
# rdma and ip print warnings without them).
if [ -d "$udir/etc/iproute2" ]; then
	mkdir -p "$root/etc" && cp -a "$udir/etc/iproute2" "$root/etc/"
fi

# busybox applets, wherever a real tool does not already stand.
bb=bin/busybox
[ -x "$root/$bb" ] || die "busybox-static did not provide /$bb"
for a in $("$udir/$bb" --list-full); do
	[ -e "$root/$a" ] || [ -L "$root/$a" ] && continue
	mkdir -p "$root/$(dirname "$a")"
	ln -s /bin/busybox "$root/$a"
done

# Kernel modules: the closure of MODULES over modules.dep, in load order
# (a module after everything it depends on), decompressed if needed.
declare -A depline=() placed=()
while IFS= read -r line; do
	m=${line%%:*}
	n=$(basename "$m")
	n=${n%%.ko*}
	depline[${n//-/_}]=$line
done <"$moddir/modules.dep"
order=()
place() {
	local n=${1//-/_} line deps d i
	[ -n "${placed[$n]:-}" ] && return 0
	line=${depline[$n]:-}
	if [ -z "$line" ]; then
		if [[ $OPTIONAL_MODULES == *" $1 "* ]] && ! grep -q "/${n}.ko" "$moddir/modules.builtin" 2>/dev/null; then
			log "module $1: not in this kernel, not needed"
			placed[$n]=absent
			return 0
		fi
		grep -q "/${1}.ko" "$moddir/modules.builtin" 2>/dev/null ||
			grep -q "/${n}.ko" "$moddir/modules.builtin" 2>/dev/null ||
			die "module $1 is neither in modules.dep nor built in"
		placed[$n]=builtin
		return 0
	fi
	placed[$n]=pending
	read -r -a deps <<<"${line#*:}"
	# modules.dep lists a module's dependencies so that the last is
	# loaded first (modprobe walks it backwards).
	for ((i = ${#deps[@]} - 1; i >= 0; i--)); do
		d=$(basename "${deps[i]}")
		place "${d%%.ko*}"
	done
	placed[$n]=1
	order+=("${line%%:*}")
}
for m in "${MODULES[@]}"; do place "$m"; done
mkdir -p "$root/lib/modules/$krel"
: >"$root/lib/modules/load-order"
for m in "${order[@]}"; do
	n=$(basename "$m")
	case $n in
	*.ko.xz) xz -dc "$moddir/$m" >"$root/lib/modules/$krel/${n%.xz}" ;;
	*.ko.zst) zstd -qdc "$moddir/$m" >"$root/lib/modules/$krel/${n%.zst}" ;;
	*.ko.gz) gzip -dc "$moddir/$m" >"$root/lib/modules/$krel/${n%.gz}" ;;
	*.ko) cp "$moddir/$m" "$root/lib/modules/$krel/$n" ;;
	*) die "unexpected module file $m" ;;
	esac
	echo "${n%%.ko*}.ko" >>"$root/lib/modules/load-order"
done

install -m 0755 "$here/guest/init" "$root/init"
echo "root:x:0:0:root:/root:/bin/sh" >"$root/etc/passwd"
echo "root:x:0:" >"$root/etc/group"
printf '127.0.0.1 localhost\n::1 localhost\n' >"$root/etc/hosts"
echo "$krel" >"$root/etc/kernel-release"

mkdir -p "$work/img"
{
	echo "flavour $flavour"
	echo "kernel $kpkg=$kver ($krel)"
	echo "$pkgs" | sed 's/^/package /'
	sed 's/^/module /' "$root/lib/modules/load-order"
} >"$work/img/manifest.txt"
# Fixed timestamps and sorted names: the same packages give the same bytes.
find "$root" -exec touch -h -d @0 {} +
(cd "$root" && find . -print0 | sort -z | cpio --null -o -H newc -R 0:0 --quiet | gzip -n) >"$work/img/initrd.gz"
cp "$vmlinuz" "$work/img/vmlinuz"
# The same kernel as an ELF file QEMU can start through its PVH entry
# point: in TCG, decompressing the xz'd bzImage and running its real-mode
# setup take longer than all the rest of the boot on a busy machine. The
# bzImage's payload is vmlinux itself (objcopy -S), so this is Debian's
# kernel byte for byte, only unpacked ahead of time. Without a PVH note
# (XEN_ELFNOTE_PHYS32_ENTRY, type 0x12) the harness boots vmlinuz.
# Debian 12 compresses the payload with xz, Debian 13 with zstd; the
# first frame of either is the whole of vmlinux, and the decompressor's
# complaint about the bytes after it does not matter.
unpack_vmlinux() {
	local magic=$1 off
	off=$(grep -abo "$magic" "$vmlinuz" | head -n1 | cut -d: -f1) || true
	[ -n "$off" ] || return 1
	tail -c +$((off + 1)) "$vmlinuz" >"$work/payload"
	case $2 in
	xz) xz -dc --single-stream "$work/payload" >"$work/img/vmlinux" 2>/dev/null || true ;;
	zstd) zstd -qdc "$work/payload" >"$work/img/vmlinux" 2>/dev/null || true ;;
	esac
	readelf -n "$work/img/vmlinux" 2>/dev/null | grep -q 'note type: (0x00000012)'
}
if unpack_vmlinux $'\xfd7zXZ\x00' xz || unpack_vmlinux $'\x28\xb5\x2f\xfd' zstd; then
	log "PVH-bootable vmlinux extracted from the bzImage"
else
	log "no PVH-bootable vmlinux in the bzImage; the guests will boot vmlinuz"
	rm -f "$work/img/vmlinux"
fi
touch "$work/img/READY"
rm -rf "$img"
mv "$work/img" "$img"
remember
# Images and unpacked packages of other versions, unused for a week, go.
touch "$kdir" "$udir"
find "$cache/images" "$cache/extract" -mindepth 1 -maxdepth 1 -type d -mtime +7 -exec rm -rf {} +
find "$cache/resolved" -type f -mtime +7 -delete
log "initrd $(du -h "$img/initrd.gz" | cut -f1), modules: $(tr '\n' ' ' <"$root/lib/modules/load-order")"
echo "$img"
