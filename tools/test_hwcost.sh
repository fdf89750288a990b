#!/bin/sh
# test_hwcost.sh BINARY — checks locus-hwcost against seed 003's figures (Table I and the
# prose of sections III-IV) and against cases worked by hand. Exit 0 when all pass.
#
# Hand-worked case A: P = 8192, S = 16, M = 1 GiB
#   sizes 16..4096 = 9; leaves 512, 256, ..., 2; gates per tree kind
#   (512 + 256 + ... + 2) - 9 = 1022 - 9 = 1013; height lg(512) = 9; delay 9 + 9 = 18.
#   Chang: M/S = 2^30 / 2^4 = 2^26 leaves, height 26, delay 4 * 26 = 104,
#   interconnection 2^26 * 26 = 1744830464 gates.
# Hand-worked case B: P = 64 KiB, S = 64, M = 16 GiB
#   sizes 64..32768 = 10; leaves 1024..2; gates (2048 - 2) - 10 = 2036; height 10; delay 20.
#   Chang: 2^34 / 2^6 = 2^28 leaves, height 28, delay 112.
set -u
bin=${1:?usage: test_hwcost.sh path/to/locus-hwcost}
failures=0
tmp=${TMPDIR:-/tmp}/test_hwcost.$$
trap 'rm -f "$tmp".out "$tmp".err' EXIT

fail() { echo "not ok - $*"; failures=$((failures + 1)); }
pass() { echo "ok - $*"; }

# run NAME ARGS...: runs the binary, output in $tmp.out / $tmp.err, status in $status
run() {
  name=$1; shift
  "$bin" "$@" >"$tmp".out 2>"$tmp".err
  status=$?
}

# expect TEXT: the last run's stdout has a line containing TEXT (fixed string)
expect() {
  if grep -F -q -e "$1" "$tmp".out; then pass "$name: $1"; else fail "$name: missing '$1'"; fi
}

# expect_row OBJ CHUNKS HEIGHT OR AND DELAY: a row of the hybrid table (spacing ignored)
expect_row() {
  if awk -v want="$*" '{ $1 = $1; if ($0 == want) found = 1 } END { exit !found }' "$tmp".out
  then pass "$name: row $*"; else fail "$name: missing row '$*'"; fi
}

# expect_usage_error ARGS...: exit status 2, one line on stderr, nothing on stdout
expect_usage_error() {
  run "bad input ($*)" "$@"
  lines=$(wc -l <"$tmp".err)
  if [ "$status" -eq 2 ] && [ "$lines" -eq 1 ] && [ ! -s "$tmp".out ]; then
    pass "$name: exit 2, $(cat "$tmp".err)"
  else
    fail "$name: status $status, $lines stderr lines, stdout $(wc -c <"$tmp".out) bytes"
  fi
}

# --- the paper's figures (defaults: P = 4096, S = 16, M = 2 GiB) -------------------------
run "defaults"
[ "$status" -eq 0 ] && pass "$name: exit 0" || fail "$name: exit $status"
expect "object sizes: 8 (16..2048 B)"
expect "gates: 502 AND + 502 OR = 1004"
expect "tree height lg(P/S): 8"
expect "critical path: 16 gate delays (OR-tree 8 + AND-tree 8)"
expect_row 16 256 8 255 255 16
expect_row 2048 2 1 1 1 2
expect "leaves M/S: 134217728 (2^27)"
expect "tree height lg(M/S): 27"
expect "critical path: 108 gate delays (OR-tree 27 + interconnection 54 + AND-tree 27)"
expect "interconnection 3623878656"
expect "OR-tree 134217727 + AND-tree 134217727"

run "defaults --json" --json
[ "$status" -eq 0 ] && pass "$name: exit 0" || fail "$name: exit $status"
expect '"and_gates": 502,'
expect '"or_gates": 502,'
expect '"critical_path": {"or_tree": 8, "and_tree": 8, "total": 16}'
expect '"tree_height": 27,'
expect '"critical_path": {"or_tree": 27, "interconnection": 54, "and_tree": 27, "total": 108}'
if command -v python3 >/dev/null 2>&1; then
  if python3 -c 'import json, sys; d = json.load(sys.stdin); \
assert d["hybrid"]["and_gates"] == 502 and d["chang"]["critical_path"]["total"] == 108' \
      <"$tmp".out 2>/dev/null; then pass "$name: valid JSON"; else fail "$name: invalid JSON"; fi
fi

# --- hand-worked case A ------------------------------------------------------------------
run "8 KiB pages, 1 GiB" --page 8192 --memory 1G
[ "$status" -eq 0 ] && pass "$name: exit 0" || fail "$name: exit $status"
expect "object sizes: 9 (16..4096 B)"
expect "gates: 1013 AND + 1013 OR = 2026"
expect "critical path: 18 gate delays (OR-tree 9 + AND-tree 9)"
expect_row 16 512 9 511 511 18
expect "tree height lg(M/S): 26"
expect "interconnection 1744830464"
expect "critical path: 104 gate delays (OR-tree 26 + interconnection 52 + AND-tree 26)"

# --- hand-worked case B (also the NAME=VALUE form and suffixes) ---------------------------
run "64 KiB pages, S=64, 16 GiB" --page=64K --min-object 64 --memory=16GiB
[ "$status" -eq 0 ] && pass "$name: exit 0" || fail "$name: exit $status"
expect "object sizes: 10 (64..32768 B)"
expect "gates: 2036 AND + 2036 OR = 4072"
expect "critical path: 20 gate delays (OR-tree 10 + AND-tree 10)"
expect "tree height lg(M/S): 28"
expect "critical path: 112 gate delays (OR-tree 28 + interconnection 56 + AND-tree 28)"

# --- bad input ----------------------------------------------------------------------------
expect_usage_error --page 5000
expect_usage_error --page abc
expect_usage_error --page
expect_usage_error --min-object 24
expect_usage_error --min-object 4096
expect_usage_error --min-object 8192
expect_usage_error --memory 3G
expect_usage_error --memory 4K
expect_usage_error --memory 2X
expect_usage_error --memory 0
expect_usage_error --bogus

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
