#!/usr/bin/env bash
# The installed Locus, used as a user would (README "Installing", docs/packaging.md):
# make install into a scratch prefix, then a C program found through pkg-config (shared and
# static), a CMake project through find_package(locus), a program linked with the override
# object, locus-run, the installed lab's `locus` command; a staged install (DESTDIR); and
# make uninstall, after which nothing is left. Each check exits non-zero with one line saying
# what broke.
#
# usage: tests/install.sh [BUILD]   (BUILD: the build folder, default build/; already built)
# LAB=none skips the lab's environment (it needs PyPI or pip's cache).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
src=$PWD/tests/install
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
mkdir -p "$prefix"
fail() { echo "install.sh: FAIL: $*" >&2; exit 1; }
step() { echo "install.sh: $*"; }

step "make install PREFIX=$prefix"
make -s install BUILD="$build" PREFIX="$prefix" > "$work/install.log" 2>&1 ||
  { tail -20 "$work/install.log"; fail "make install"; }

# Every release library: a SONAME'd shared object, its links, a static library, a .pc file and
# an override object; the flagship is liblocus.so.0 -> liblocus.so.0.2.0.
version=$(sed -n 's/^#define LOCUS_VERSION "\(.*\)"/\1/p' include/locus.h)
major=${version%%.*}
[ "$(readlink "$prefix/lib/liblocus.so.$major")" = "liblocus.so.$version" ] ||
  fail "liblocus.so.$major does not point to liblocus.so.$version"
for lib in $(sed -n 's/.*"file": "build\/lib\/lib\(.*\)\.so".*/\1/p' "$build/variants.json"); do
  so=$prefix/lib/lib$lib.so.$version
  [ -f "$so" ] || fail "$so missing"
  soname=$(readelf -d "$so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
  [ "$soname" = "lib$lib.so.$major" ] || fail "$so has SONAME '$soname', not lib$lib.so.$major"
  for f in "lib/lib$lib.so" "lib/lib$lib.a" "lib/pkgconfig/$lib.pc" "lib/locus/$lib.o"; do
    [ -e "$prefix/$f" ] || fail "$prefix/$f missing"
  done
done
for f in include/locus.h include/locus.hpp bin/locus-hwcost bin/locus-run share/doc/locus/README.md \
         lib/cmake/locus/locus-config.cmake lib/cmake/locus/locus-config-version.cmake; do
  [ -e "$prefix/$f" ] || fail "$prefix/$f missing"
done

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
[ "$(pkg-config --modversion locus)" = "$version" ] || fail "pkg-config --modversion locus"

step "pkg-config: shared"
# shellcheck disable=SC2046
cc -O2 -o "$work/app" "$src/app.c" $(pkg-config --cflags --libs locus) || fail "cc with pkg-config locus"
readelf -d "$work/app" | grep "NEEDED.*\[liblocus.so.$major\]" >/dev/null || fail "app does not need liblocus.so.$major"
out=$(LD_LIBRARY_PATH=$prefix/lib "$work/app") || fail "app (pkg-config, shared)"
[ "$out" = "vam $version ok" ] || fail "app printed '$out'"

step "pkg-config: static (-static, --static)"
# shellcheck disable=SC2046
cc -O2 -static -o "$work/app-static" "$src/app.c" $(pkg-config --static --cflags --libs locus-tp) ||
  fail "cc -static with pkg-config --static locus-tp"
readelf -d "$work/app-static" 2>/dev/null | grep NEEDED >/dev/null && fail "app-static is not static"
out=$("$work/app-static") || fail "app-static"
[ "$out" = "tp $version ok" ] || fail "app-static printed '$out'"

step "override object, linked first (no LD_PRELOAD, no shared library)"
cc -O2 -o "$work/app-override" "$(pkg-config --variable=override locus)" "$src/app.c" \
   $(pkg-config --cflags locus) -pthread || fail "cc with the override object"
readelf -d "$work/app-override" | grep "NEEDED.*liblocus" >/dev/null && fail "app-override needs a Locus library"
out=$(env -u LD_PRELOAD "$work/app-override") || fail "app-override"
[ "$out" = "vam $version ok" ] || fail "app-override printed '$out'"
# The C library's own allocations land in Locus too: a program that never calls malloc
# itself still counts its calls at exit.
LOCUS_STATS=1 "$work/app-override" 2>&1 >/dev/null | grep "locus: statistics (vam $version)" >/dev/null ||
  fail "app-override: LOCUS_STATS=1 printed no statistics"

step "CMake: find_package(locus CONFIG)"
cmake -S "$src" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
      > "$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail "cmake configure (find_package)"; }
cmake --build "$work/cmake" > "$work/cmake-build.log" 2>&1 ||
  { cat "$work/cmake-build.log"; fail "cmake build"; }
for t in app_shared:vam app_static:vam app_phk:phk app_override:vam; do
  out=$("$work/cmake/${t%%:*}") || fail "${t%%:*} (CMake)"
  [ "$out" = "${t#*:} $version ok" ] || fail "${t%%:*} printed '$out'"
done
readelf -d "$work/cmake/app_static" | grep "NEEDED.*liblocus" >/dev/null && fail "app_static needs a Locus library"
# The version file: 0.x releases are compatible within their minor version only.
cmake -S "$src" -B "$work/cmake-0.1" -DCMAKE_PREFIX_PATH="$prefix" -DLOCUS_WANT=0.1 \
      > "$work/cmake-0.1.log" 2>&1 && fail "find_package(locus 0.1) accepted version $version"
grep -q "locus-config.cmake, version: $version" "$work/cmake-0.1.log" ||
  { cat "$work/cmake-0.1.log"; fail "find_package(locus 0.1) failed for another reason"; }

step "locus-run"
run=$prefix/bin/locus-run
err=$("$run" --stats -- python3 -c 'print(sum(len(str(i)) for i in range(100000)))' 2>&1 >/dev/null) ||
  fail "locus-run --stats -- python3"
echo "$err" | grep "locus: statistics (vam $version)" >/dev/null || fail "locus-run --stats: no statistics: $err"
err=$("$run" --variant phk --verbose -- ls / 2>&1 >/dev/null) || fail "locus-run --variant phk"
echo "$err" | grep "phk" >/dev/null || fail "locus-run --variant phk --verbose did not load phk: $err"
"$run" --list | grep "^medius $prefix/lib/liblocus-medius.so.$major$" >/dev/null || fail "locus-run --list"
set +e
err=$("$run" -- no-such-command-here 2>&1); rc=$?
[ $rc -eq 127 ] && [ "$(echo "$err" | wc -l)" -eq 1 ] && echo "$err" | grep "command not found: no-such-command-here" >/dev/null ||
  fail "locus-run with a missing command: status $rc, '$err'"
err=$("$run" --variant nosuch -- true 2>&1); rc=$?
[ $rc -eq 127 ] && echo "$err" | grep "unknown variant 'nosuch'" >/dev/null || fail "locus-run --variant nosuch: '$err'"
mv "$prefix/lib/liblocus-lf.so.$version" "$work/"
err=$("$run" --variant lf -- true 2>&1); rc=$?
mv "$work/liblocus-lf.so.$version" "$prefix/lib/"
[ $rc -eq 127 ] && echo "$err" | grep "library .*liblocus-lf.so.$major is missing" >/dev/null ||
  fail "locus-run with a missing library: '$err'"
set -e

if [ "${LAB:-venv}" != none ]; then
  step "the lab, outside the source tree"
  (cd "$work" && "$prefix/bin/locus" --help >/dev/null) || fail "locus --help"
  [ "$("$prefix/bin/locus" --version)" = "locus-lab $version" ] || fail "locus --version is not $version"
  (cd "$work" && "$prefix/bin/locus" compare --quick -a glibc,locus,tp -w churn,python -r 1 --no-plots \
     --output "$work/results" > "$work/lab.log" 2>&1) ||
    { tail -20 "$work/lab.log"; fail "locus compare from the installed lab"; }
fi

if command -v cargo >/dev/null 2>&1; then
  step "Rust: locus with the system feature (the installed library, through pkg-config)"
  (cd rust && LD_LIBRARY_PATH=$prefix/lib CARGO_TARGET_DIR=$work/cargo \
     cargo test -q --features system -p locus --test global_allocator > "$work/cargo.log" 2>&1) ||
    { tail -30 "$work/cargo.log"; fail "cargo test --features system"; }
  readelf -d "$(ls "$work"/cargo/debug/deps/global_allocator-* | grep -v '\.d$' | head -1)" |
    grep "NEEDED.*\[liblocus.so.$major\]" >/dev/null || fail "the system feature did not link liblocus.so.$major"
else
  step "Rust: skipped (no cargo)"
fi

step "make uninstall"
make -s uninstall PREFIX="$prefix" > /dev/null || fail "make uninstall"
left=$(find "$prefix" -mindepth 1 | head -5)
[ -z "$left" ] || fail "make uninstall left: $left"

step "staged install (DESTDIR) for a package"
DESTDIR=$work/stage LAB=none make -s install BUILD="$build" PREFIX=/opt/locus > "$work/stage.log" 2>&1 ||
  { tail -20 "$work/stage.log"; fail "make install DESTDIR=... PREFIX=/opt/locus"; }
grep -q "^prefix=/opt/locus$" "$work/stage/opt/locus/lib/pkgconfig/locus.pc" || fail "staged locus.pc names the staging root"
grep -q "^libdir='/opt/locus/lib'$" "$work/stage/opt/locus/bin/locus-run" || fail "staged locus-run names the staging root"
grep -q "^/opt/locus/lib/liblocus.so.$version$" "$work/stage/opt/locus/share/locus/install-manifest.txt" ||
  fail "staged manifest lacks /opt/locus/lib/liblocus.so.$version"
DESTDIR=$work/stage make -s uninstall PREFIX=/opt/locus > /dev/null || fail "staged make uninstall"
[ -z "$(find "$work/stage/opt/locus" -mindepth 1 2>/dev/null | head -1)" ] || fail "staged uninstall left files"
step "all checks passed"
