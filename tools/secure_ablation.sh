#!/usr/bin/env bash
# What each protection of the secure build costs and catches (docs/secure.md), from the
# ablation builds: for liblocus.so, liblocus-secure.so and every liblocus-secure-no-<p>.so,
# the instructions callgrind counts for bench/churn and bench/batches (--quick; deterministic,
# so the table is the same on any machine with the same compiler), and the cases of the misuse
# suite the library catches, with the ones the full secure build catches and it does not.
# Prints a Markdown table.
#
#   cmake -S . -B build -DLOCUS_ABLATION=ON && cmake --build build -j 2
#   tools/secure_ablation.sh build          (about 10 minutes on 2 cores)
set -euo pipefail
build=${1:-build}
[ -x "$build/bench/churn" ] && [ -x "$build/tests/misuse" ] || {
  echo "secure_ablation: no $build/bench/churn or $build/tests/misuse: build first" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "secure_ablation: valgrind is needed (apt-get install valgrind)" >&2; exit 2; }
ls "$build"/lib/liblocus-secure-no-*.so >/dev/null 2>&1 || {
  echo "secure_ablation: no ablation builds in $build/lib: configure with -DLOCUS_ABLATION=ON" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

instructions() {   # library program -> instructions of the whole run
  LD_PRELOAD=$1 valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$build/bench/$2" 1 --quick >/dev/null 2>&1
  awk '/^summary:/ {print $2}' "$tmp/cg"
}
caught() {         # library -> the names of the misuse cases it catches, one a line
  LD_PRELOAD=$1 "$build/tests/misuse" 2>&1 | awk '$1 == "caught" {print $2}' | sort
}

libs=("$build/lib/liblocus.so" "$build/lib/liblocus-secure.so" "$build"/lib/liblocus-secure-no-*.so)
caught "$build/lib/liblocus-secure.so" >"$tmp/secure.caught"
base_churn=$(instructions "$build/lib/liblocus.so" churn)
base_batches=$(instructions "$build/lib/liblocus.so" batches)
echo "| library | churn instructions (x liblocus.so) | batches instructions (x liblocus.so) | misuse cases caught | caught by the full secure build, missed here |"
echo "|---|---:|---:|---:|---|"
for lib in "${libs[@]}"; do
  name=$(basename "$lib" .so)
  churn=$(instructions "$lib" churn)
  batches=$(instructions "$lib" batches)
  caught "$lib" >"$tmp/this.caught"
  n=$(wc -l <"$tmp/this.caught")
  lost=$(comm -23 "$tmp/secure.caught" "$tmp/this.caught" | paste -sd, - | sed 's/,/, /g')
  awk -v n="$name" -v c="$churn" -v b="$batches" -v bc="$base_churn" -v bb="$base_batches" \
      -v k="$n" -v l="${lost:--}" \
      'BEGIN { printf "| %s | %.1f M (%.3f) | %.1f M (%.3f) | %d | %s |\n", n, c / 1e6, c / bc, b / 1e6, b / bb, k, l }'
done
