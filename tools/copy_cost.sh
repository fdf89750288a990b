#!/usr/bin/env bash
# The cost of the secure build's checked memcpy and memset per call, in instructions
# (callgrind: deterministic), for small and large copies into heap objects and elsewhere:
# tools/copy_cost.c under liblocus.so (the C library's functions) and liblocus-secure.so.
# Prints a Markdown table (docs/secure.md).
#
#   tools/copy_cost.sh build
set -euo pipefail
build=${1:-build}
command -v valgrind >/dev/null || { echo "copy_cost: valgrind is needed" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/copy_cost" "$(dirname "$0")/copy_cost.c"

instructions() {   # library size where fn n -> instructions of the whole run
  LD_PRELOAD=$1 valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$tmp/copy_cost" "$2" "$3" "$4" "$5" >/dev/null 2>&1 || true
  awk '/^summary:/ {print $2}' "$tmp/cg"
}
per_call() {       # library size where fn n -> instructions per call
  local with without
  with=$(instructions "$1" "$2" "$3" "$4" "$5")
  without=$(instructions "$1" "$2" "$3" "$4" 0)
  echo $(( (with - without) / $5 ))
}

echo "| call | size | destination | liblocus.so (C library) | liblocus-secure.so | added by the check |"
echo "|---|---:|---|---:|---:|---:|"
for fn in memcpy memset; do
  for size in 16 64 4096 262144; do
    case $size in 262144) n=200;; 4096) n=5000;; *) n=50000;; esac
    for where in heap global stack; do
      [ "$where" = stack ] && [ "$size" -gt 256 ] && continue
      [ "$fn" = memset ] && [ "$where" = stack ] && continue
      base=$(per_call "$build/lib/liblocus.so" "$size" "$where" "$fn" "$n")
      sec=$(per_call "$build/lib/liblocus-secure.so" "$size" "$where" "$fn" "$n")
      echo "| $fn | $size | $where | $base | $sec | $((sec - base)) |"
    done
  done
done
