#!/bin/sh
# make deb: the Debian package locus_VERSION-1_ARCH.deb from an already built tree, with
# dpkg-deb (no debhelper needed). One package holds everything `make install` installs, with
# prefix /usr: the libraries (shared, static, override objects), headers, pkg-config and CMake
# files, locus-run, locus-hwcost, the docs, and the lab, which runs on Debian's python3
# packages (Recommends) instead of a private environment.
# usage: packaging/deb.sh BUILD    -> BUILD/locus_VERSION-1_ARCH.deb
set -eu
build=${1:?usage: deb.sh BUILD}
src=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^#define LOCUS_VERSION "\(.*\)"/\1/p' "$src/include/locus.h")
arch=$(dpkg --print-architecture)
root=$build/deb/root
deb=$build/locus_$version-1_$arch.deb

rm -rf "$build/deb"
mkdir -p "$root/DEBIAN"
DESTDIR=$root LAB=system cmake --install "$build" --prefix /usr > "$build/deb/install.log"
# dpkg keeps its own list of the files; `make uninstall` is not for a packaged Locus.
rm -f "$root/usr/share/locus/install-manifest.txt"
rmdir "$root/usr/share/locus" 2>/dev/null || true
install -m 644 "$src/LICENSE" "$root/usr/share/doc/locus/copyright"
find "$root" -name __pycache__ -prune -exec rm -rf {} +

size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@version@/$version-1/" -e "s/@arch@/$arch/" -e "s/@size@/$size/" \
    "$src/packaging/debian-control.in" > "$root/DEBIAN/control"
# The shared libraries are new to the linker's cache: run ldconfig after installing.
echo "activate-noawait ldconfig" > "$root/DEBIAN/triggers"
(cd "$root" && find usr -type f -exec md5sum {} + > DEBIAN/md5sums)
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" > /dev/null
echo "$deb"
