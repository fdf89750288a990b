#!/usr/bin/env bash
# The Debian package: `make deb` builds it; its contents and control fields are checked; it
# is installed with dpkg into a throwaway root (its own dpkg database, nothing of the system
# touched), a program runs on its libraries there, and removing it leaves none of its files.
# With --system (CI, on a fresh machine, as root) it is also installed for real with
# `apt-get install ./locus_*.deb`, used through locus-run and pkg-config, and purged.
#
# usage: tests/deb.sh [--system] [BUILD]   (BUILD already built, default build/)
set -euo pipefail
cd "$(dirname "$0")/.."
system=no
[ "${1:-}" = --system ] && { system=yes; shift; }
build=${1:-build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "deb.sh: FAIL: $*" >&2; exit 1; }
step() { echo "deb.sh: $*"; }
command -v dpkg-deb >/dev/null || { echo "deb.sh: skipped: no dpkg-deb (not a Debian system)"; exit 0; }

version=$(sed -n 's/^#define LOCUS_VERSION "\(.*\)"/\1/p' include/locus.h)
major=${version%%.*}
step "make deb"
deb=$(make -s deb BUILD="$build" | tail -1)
[ -f "$deb" ] || fail "make deb made no package ($deb)"
case $deb in */locus_"$version"-1_*.deb) ;; *) fail "package name $deb";; esac

step "contents"
dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\./|/|' > "$work/contents"
for f in /usr/lib/liblocus.so.$version /usr/lib/liblocus.so.$major /usr/lib/liblocus.so /usr/lib/liblocus.a \
         /usr/lib/liblocus-phk.so.$version /usr/lib/locus/locus.o /usr/lib/pkgconfig/locus.pc \
         /usr/lib/cmake/locus/locus-config.cmake /usr/include/locus.h /usr/include/locus.hpp \
         /usr/bin/locus-run /usr/bin/locus /usr/bin/locus-hwcost /usr/share/doc/locus/copyright \
         /usr/lib/locus/python/locus_lab/cli.py /usr/lib/locus/variants.json; do
  grep -qx "$f" "$work/contents" || fail "$f is not in the package"
done
grep -q "install-manifest\|__pycache__\|/build/" "$work/contents" && fail "build leftovers in the package"
# (the fields read first: grep -q stops reading early, which pipefail would count as a failure)
fields=$(dpkg-deb -f "$deb" Package Version Depends)
grep -q "Version: $version-1" <<<"$fields" || fail "control: Version"
dpkg-deb -c "$deb" | awk '$2 != "root/root" { exit 1 }' || fail "files not owned by root"

step "install into a throwaway root"
r=$work/root
mkdir -p "$r/var/lib/dpkg/info" "$r/var/lib/dpkg/updates"
touch "$r/var/lib/dpkg/status"
dpkg --root="$r" --force-depends --force-not-root --no-triggers -i "$deb" > "$work/dpkg.log" 2>&1 ||
  { cat "$work/dpkg.log"; fail "dpkg -i into $r"; }
dpkg --root="$r" -s locus | grep "Status: install ok installed" >/dev/null || fail "dpkg -s after install"
[ "$(readlink "$r/usr/lib/liblocus.so.$major")" = "liblocus.so.$version" ] || fail "SONAME link in the root"
err=$(LD_PRELOAD="$r/usr/lib/liblocus-tp.so.$major" LOCUS_STATS=1 python3 -c 'print(list(range(10000))[-1])' 2>&1 >/dev/null)
echo "$err" | grep "locus: statistics (tp $version)" >/dev/null || fail "the packaged liblocus-tp did not serve python3: $err"
cc -O2 -o "$work/app" "$r/usr/lib/locus/locus.o" tests/install/app.c -I"$r/usr/include" -pthread ||
  fail "cc with the packaged override object"
[ "$("$work/app")" = "vam $version ok" ] || fail "the packaged override object"
dpkg --root="$r" --force-not-root --no-triggers -r locus > "$work/dpkg-r.log" 2>&1 ||
  { cat "$work/dpkg-r.log"; fail "dpkg -r"; }
left=$(find "$r" -mindepth 1 -not -path "$r/var/lib/dpkg*" -not -type d | head -5)
[ -z "$left" ] || fail "dpkg -r left: $left"

if [ $system = yes ]; then
  step "apt-get install ./$(basename "$deb") (the system)"
  # A package of the same version left by an earlier run would make apt keep the old files.
  if dpkg -s locus >/dev/null 2>&1; then DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq locus >/dev/null; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "./$deb" > "$work/apt.log" 2>&1 ||
    { tail -20 "$work/apt.log"; fail "apt-get install"; }
  ldconfig -p | grep "liblocus.so.$major " >/dev/null || fail "liblocus.so.$major not in the linker cache"
  err=$(locus-run --stats -- python3 -c 'print(1)' 2>&1 >/dev/null)
  echo "$err" | grep "locus: statistics (vam $version)" >/dev/null || fail "locus-run from the package: $err"
  # shellcheck disable=SC2046
  cc -O2 -o "$work/app-sys" tests/install/app.c $(pkg-config --cflags --libs locus) || fail "cc, pkg-config, package"
  [ "$("$work/app-sys")" = "vam $version ok" ] || fail "app against the packaged library"
  # Installed without its Recommends: the lab runs where Debian's python3-rich, -numpy and
  # -matplotlib are there, and says in one line what is missing where they are not.
  if python3 -c 'import rich, numpy, matplotlib' 2>/dev/null; then
    locus --help > /dev/null || fail "the packaged lab: locus --help"
  else
    out=$(locus --help 2>&1) && fail "the packaged lab ran without its Python packages"
    [ "$(wc -l <<<"$out")" -eq 1 ] && grep "needs the Python package" <<<"$out" >/dev/null ||
      fail "the packaged lab without its Python packages: $out"
  fi
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq locus > "$work/apt.log" 2>&1 || fail "apt-get purge locus"
  [ ! -e /usr/lib/liblocus.so.$major ] || fail "apt-get purge left /usr/lib/liblocus.so.$major"
fi
step "all checks passed"
