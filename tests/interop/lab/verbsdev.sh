#!/usr/bin/env bash
# verbsdev.sh unpacks a Debian release's libibverbs-dev and libibverbs1
# (headers, libibverbs.so) for compiling C programs on the host that run in
# that release's lab guest, and prints the directory they are unpacked in
# (its usr/include and usr/lib/x86_64-linux-gnu) as its last line.
#
# Usage: verbsdev.sh [bookworm|trixie]   (default: $UROCE_LAB_FLAVOUR, else bookworm)
#
# The packages come through apt-get download + dpkg -x, with the same apt
# configuration build.sh uses for the flavour (trixie: the private one
# under $UROCE_LAB_CACHE/apt/trixie, which build.sh sets up; run build.sh
# for the flavour first), into build.sh's cache; the host's apt state is
# never touched. The result is cached per package version.
set -euo pipefail
export LC_ALL=C DEBIAN_FRONTEND=noninteractive

cache=${UROCE_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/uroce-lab}
flavour=${1:-${UROCE_LAB_FLAVOUR:-bookworm}}
die() { echo "verbsdev: error: $*" >&2; exit 1; }

APT=()
case $flavour in
bookworm) ;;
trixie)
	# As build.sh's APT for trixie.
	adir=$cache/apt/$flavour
	[ -f "$adir/etc/sources.list.d/$flavour.sources" ] ||
		die "no apt configuration for $flavour under $adir (run tests/interop/lab/build.sh $flavour first)"
	APT=(-o "Dir::Etc::SourceList=$adir/etc/sources.list"
		-o "Dir::Etc::SourceParts=$adir/etc/sources.list.d"
		-o "Dir::Etc::Preferences=$adir/etc/preferences"
		-o "Dir::Etc::PreferencesParts=$adir/etc/preferences.d"
		-o "Dir::State::Lists=$adir/lists"
		-o "Dir::Cache=$adir/cache"
		-o "Dir::State::status=/dev/null"
		-o "APT::Sandbox::User=root")
	;;
*) die "unknown flavour $flavour (bookworm or trixie)" ;;
esac

mkdir -p "$cache"/{debs,extract}
exec 9>"$cache/.lock"
flock 9 # build.sh takes the same lock

ver=$(apt-cache "${APT[@]}" policy libibverbs-dev 2>/dev/null | awk '/Candidate:/{print $2; exit}')
[ -n "$ver" ] && [ "$ver" != "(none)" ] || die "apt knows no libibverbs-dev for $flavour"
dir=$cache/extract/libibverbs-dev_$ver
if [ ! -f "$dir/.done" ]; then
	rm -rf "$dir"
	for p in libibverbs-dev libibverbs1; do
		f=$(ls "$cache/debs/${p}_${ver//:/%3a}_"*.deb 2>/dev/null | head -n1 || true)
		if [ -z "$f" ]; then
			(cd "$cache/debs" && apt-get "${APT[@]}" download -qq "$p=$ver" >&2) || die "apt-get download $p=$ver"
			f=$(ls "$cache/debs/${p}_${ver//:/%3a}_"*.deb | head -n1)
		fi
		dpkg -x "$f" "$dir"
	done
	touch "$dir/.done"
fi
echo "$dir"
