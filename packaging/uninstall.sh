#!/bin/sh
# make uninstall: removes exactly the files `make install` wrote into PREFIX (its manifest,
# PREFIX/share/locus/install-manifest.txt, lists them, itself included, and the folders of
# the lab's environment), then the folders left empty, up to but not including PREFIX.
# usage: uninstall.sh PREFIX    (DESTDIR from the environment, as for make install)
set -eu
prefix=${1:?usage: uninstall.sh PREFIX}
root=${DESTDIR:-}
manifest="$root$prefix/share/locus/install-manifest.txt"
[ -f "$manifest" ] || { echo "uninstall: nothing to do: no Locus installed in $root$prefix ($manifest missing)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Only paths inside PREFIX, with the staging root in front.
awk -v p="$prefix/" -v r="$root" 'index($0, p) == 1 { print r $0 }' "$manifest" > "$work/paths"
outside=$(awk -v p="$prefix/" 'index($0, p) != 1' "$manifest" | head -1)
[ -z "$outside" ] || echo "uninstall: $outside (and maybe more) is outside $prefix; left alone" >&2
# Files and links first (a link to a folder is a file here), in batches.
while IFS= read -r f; do
  if [ -L "$f" ] || { [ -e "$f" ] && [ ! -d "$f" ]; }; then printf '%s\n' "$f"; fi
done < "$work/paths" > "$work/files"
tr '\n' '\0' < "$work/files" | xargs -0 -r rm -f
# Then every listed folder and every folder above a listed path, up to PREFIX, deepest first:
# those left empty go.
awk -v top="$root$prefix" '{ d = $0; while (d != top && index(d, top "/") == 1) { print d; sub("/[^/]*$", "", d) } }' \
  "$work/paths" | sort -u | awk '{ print gsub("/", "/"), $0 }' | sort -rn | cut -d' ' -f2- |
  while IFS= read -r d; do [ -d "$d" ] && [ ! -L "$d" ] && printf '%s\0' "$d"; done |
  xargs -0 -r rmdir --ignore-fail-on-non-empty
echo "uninstall: removed $(wc -l < "$work/files") files from $root$prefix"
