#!/bin/sh
# test_scaling.sh BUILD_DIR — checks tools/scaling.sh and tools/scaling_table.py: bad options
# are refused with one line and status 2; a run cut short by its deadline still leaves a CSV
# with a successful row, Locus's statistics and a table. Exit 0 when all pass.
set -u
build=${1:?usage: test_scaling.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
tmp=${TMPDIR:-/tmp}/test_scaling.$$
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "not ok - $*"; failures=$((failures + 1)); }
pass() { echo "ok - $*"; }

# refused OPTIONS...: status 2 and exactly one line on stderr
refused() {
  bash "$here/scaling.sh" "$tmp/x" --build "$build" "$@" >/dev/null 2>"$tmp.err"
  status=$?
  if [ $status -eq 2 ] && [ "$(wc -l < "$tmp.err")" -eq 1 ]; then pass "refused: $*"; else fail "refused: $* (status $status, $(cat "$tmp.err"))"; fi
}
refused --reps x
refused --threads 1,,4
refused --bogus
bash "$here/scaling.sh" "$tmp/x" --build "$tmp/nowhere" >/dev/null 2>"$tmp.err"
[ $? -eq 2 ] && grep -q "no benchmarks" "$tmp.err" && pass "refused: a build without benchmarks" || fail "a build without benchmarks was not refused"

bash "$here/scaling.sh" "$tmp/out" --build "$build" --threads 1 --reps 1 --deadline 1 >/dev/null 2>"$tmp.err"
[ $? -eq 0 ] && pass "a run cut by its deadline ends well" || fail "the short run failed: $(cat "$tmp.err")"
head -1 "$tmp/out/scaling.csv" 2>/dev/null | grep -q '^rep,workload,kind,threads,allocator,wall_s,user_s,sys_s,status$' && pass "CSV header" || fail "CSV header"
grep -q '^1,turnover,strong,1,glibc,[0-9.]*,[0-9.]*,[0-9.]*,0$' "$tmp/out/scaling.csv" 2>/dev/null && pass "a successful row" || fail "no successful row: $(cat "$tmp/out/scaling.csv" 2>/dev/null)"
grep -q "malloc_calls" "$tmp/out/locus_stats.txt" 2>/dev/null && pass "Locus's statistics" || fail "no statistics"
python3 "$here/scaling_table.py" "$tmp/out/scaling.csv" > "$tmp.table" 2>&1 && grep -q "^### turnover (strong" "$tmp.table" && grep -q "^| 1 | " "$tmp.table" && pass "the table" || fail "the table: $(cat "$tmp.table")"
python3 "$here/scaling_table.py" "$tmp/none.csv" >/dev/null 2>"$tmp.err"
[ $? -eq 2 ] && [ "$(wc -l < "$tmp.err")" -eq 1 ] && pass "the table refuses a missing file in one line" || fail "missing file: $(cat "$tmp.err")"
rm -f "$tmp.err" "$tmp.table"
[ $failures -eq 0 ]
