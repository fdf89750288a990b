#!/bin/sh
# make uninstall: removes exactly the files `make install` wrote into PREFIX (its manifest,
# PREFIX/share/locus/install-manifest.txt, lists them, itself included), then the folders
# that are left empty, up to but not including PREFIX.
# usage: uninstall.sh PREFIX    (DESTDIR from the environment, as for make install)
set -eu
prefix=${1:?usage: uninstall.sh PREFIX}
root=${DESTDIR:-}
manifest="$root$prefix/share/locus/install-manifest.txt"
[ -f "$manifest" ] || { echo "uninstall: nothing to do: no Locus installed in $root$prefix ($manifest missing)" >&2; exit 1; }
list=$(mktemp)
trap 'rm -f "$list"' EXIT
cp "$manifest" "$list"
n=0
while IFS= read -r f; do
  case $f in "$prefix"/*) ;; *) echo "uninstall: $f is outside $prefix; left alone" >&2; continue ;; esac
  if [ -e "$root$f" ] || [ -L "$root$f" ]; then rm -f "$root$f"; n=$((n + 1)); fi
done < "$list"
# Folders of the removed files, deepest first, each climbed while it is empty.
sed 's|/[^/]*$||' "$list" | sort -u | awk '{ print gsub("/", "/"), $0 }' | sort -rn | cut -d' ' -f2- |
while IFS= read -r d; do
  while [ "$d" != "$prefix" ] && [ "${d#"$prefix"/}" != "$d" ] && rmdir "$root$d" 2>/dev/null; do
    d=${d%/*}
  done
done
echo "uninstall: removed $n files from $root$prefix"
