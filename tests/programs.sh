#!/bin/sh
# programs.sh — real programs run under the allocator in LD_PRELOAD (set by CTest).
#
#   programs.sh python|perl|gcc|git|sqlite3
#
# Each program does allocation-heavy work and prints a result that is compared with the
# expected value: a literal where the arithmetic is known, otherwise the same work run without
# the preload. Exit status: 0 pass, 1 fail, 77 skip (program not installed).
# The shell itself, and every tool it starts, run under the preload too.

set -u

prog=${1:-}
if [ -z "$prog" ]; then
  echo "usage: $0 python|perl|gcc|git|sqlite3" >&2
  exit 2
fi

LIMIT=${LOCUS_TEST_PROGRAM_TIMEOUT:-90}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/locus-programs.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

fail() {
  echo "FAIL programs_$prog: $*" >&2
  exit 1
}

need() {
  for tool in "$@"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "skip: $tool is not installed"
      exit 77
    fi
  done
}

# Runs a command with a time limit; stdout to $tmp/out, stderr to $tmp/err.
run() {
  if command -v timeout >/dev/null 2>&1; then
    timeout "$LIMIT" "$@" >"$tmp/out" 2>"$tmp/err"
  else
    "$@" >"$tmp/out" 2>"$tmp/err"
  fi
  rc=$?
  if grep -q "cannot be preloaded" "$tmp/err"; then
    cat "$tmp/err" >&2
    fail "the library in LD_PRELOAD was not loaded"
  fi
  if [ "$rc" -eq 124 ]; then
    fail "'$*' did not finish within $LIMIT s"
  fi
  if [ "$rc" -ne 0 ]; then
    echo "--- stderr of '$*':" >&2
    tail -n 20 "$tmp/err" >&2
    fail "'$*' exited with status $rc"
  fi
  return 0
}

# The same command without the preload: the reference output, in $tmp/ref.
reference() {
  if [ -n "${LD_PRELOAD:-}" ]; then
    env -u LD_PRELOAD "$@" >"$tmp/ref" 2>"$tmp/referr" || {
      cat "$tmp/referr" >&2
      fail "reference run (no preload) of '$*' failed"
    }
  else
    cp "$tmp/out" "$tmp/ref"
  fi
}

expect_same() {
  if ! cmp -s "$tmp/out" "$tmp/ref"; then
    echo "--- expected (no preload):" >&2
    head -c 2000 "$tmp/ref" >&2
    echo "--- got:" >&2
    head -c 2000 "$tmp/out" >&2
    fail "output differs from the run without the preload"
  fi
}

# The output must be the literal $1; if it is not, and the same command without the preload
# prints the same thing anyway (another version of the program), that is accepted.
expect_known() {
  known=$1
  shift
  got=$(cat "$tmp/out")
  [ "$got" = "$known" ] && return 0
  reference "$@"
  expect_same
  echo "note: output differs from the recorded value but matches the run without the preload"
}

expect_text() {
  got=$(cat "$tmp/out")
  if [ "$got" != "$1" ]; then
    echo "--- expected:" >&2
    printf '%s\n' "$1" >&2
    echo "--- got:" >&2
    printf '%s\n' "$got" >&2
    fail "unexpected output"
  fi
}

case "$prog" in
python)
  need python3
  cat >"$tmp/work.py" <<'EOF'
import ctypes, hashlib, json, os, sys

# Under a Locus library the process really uses it (the preload took effect).
if os.environ.get("LOCUS_TEST_EXPECT_LOCUS") == "1" and os.environ.get("LD_PRELOAD"):
    lib = ctypes.CDLL(None)
    if not hasattr(lib, "locus_variant"):
        sys.exit("locus_variant not found in the python process")

d = {}
for i in range(100000):
    d["k%d" % i] = [i, str(i) * (i % 7), {"v": i * 3, "w": [i] * (i % 5)}]
lst = list(range(300000))
text = json.dumps(d, sort_keys=True)
d2 = json.loads(text)
assert d == d2, "json round trip changed the data"
for i in range(0, 100000, 2):
    del d2["k%d" % i]
strs = sorted(str(x) * 3 for x in lst[::7])
sets = [set(range(i, i + 50)) for i in range(0, 20000, 10)]
total = sum(v[0] for v in d2.values()) + sum(lst) + len(text) + len(strs) + sum(len(s) for s in sets)
print(total, hashlib.sha256(text.encode()).hexdigest()[:16], len(d2))
EOF
  run env PYTHONHASHSEED=0 python3 "$tmp/work.py"
  expect_known "47507318043 b070d8ae1e88d292 50000" env PYTHONHASHSEED=0 python3 "$tmp/work.py"
  ;;

perl)
  need perl
  cat >"$tmp/work.pl" <<'EOF'
use strict; use warnings;
my %h;
for my $i (1 .. 200000) { $h{"key$i"} = ("v" x ($i % 13)) . $i; }
my $n = 0;
for my $k (keys %h) { $n++ if $h{$k} =~ /^(v*)(\d+)$/ && length($1) == $2 % 13; }
delete $h{"key$_"} for grep { $_ % 3 == 0 } 1 .. 200000;
my $s = join(",", map { $h{$_} } sort keys %h);
$s =~ s/v{3,}/V/g;
my $sum = 0;
$sum += $_ for ($s =~ /(\d+)/g);
my @words = split /,/, $s;
my %count;
$count{length $_}++ for @words;
print "$n ", scalar(keys %h), " ", length($s), " $sum ", join(" ", map { "$_:$count{$_}" } sort { $a <=> $b } keys %count), "\n";
EOF
  run perl "$tmp/work.pl"
  expect_known "200000 133334 992602 13333466667 2:10 3:98 4:974 5:9737 6:56359 7:61028 8:5128" \
    perl "$tmp/work.pl"
  ;;

gcc)
  need gcc
  cat >"$tmp/work.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct node { struct node *next; unsigned long v; char *s; };
static int cmp(const void *a, const void *b) {
  unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
  return x < y ? -1 : x > y;
}
int main(void) {
  struct node *head = NULL;
  unsigned long r = 12345, sum = 0;
  for (int i = 0; i < 100000; i++) {
    struct node *n = malloc(sizeof *n);
    r = r * 6364136223846793005ul + 1442695040888963407ul;
    n->v = r >> 40;
    n->s = malloc(n->v % 200 + 1);
    memset(n->s, 'a', n->v % 200);
    n->s[n->v % 200] = 0;
    n->next = head;
    head = n;
  }
  unsigned long *arr = malloc(100000 * sizeof *arr);
  int k = 0;
  while (head) {
    struct node *n = head;
    head = n->next;
    arr[k++] = n->v;
    sum += strlen(n->s);
    free(n->s);
    free(n);
  }
  qsort(arr, k, sizeof *arr, cmp);
  printf("%d %lu %lu %lu\n", k, sum, arr[0], arr[k - 1]);
  free(arr);
  return 0;
}
EOF
  run gcc -O2 -Wall -o "$tmp/work" "$tmp/work.c"
  run "$tmp/work"
  expect_known "100000 9985980 28 16776835" "$tmp/work"
  if command -v g++ >/dev/null 2>&1; then
    cat >"$tmp/work2.cpp" <<'EOF'
#include <iostream>
#include <map>
#include <string>
#include <vector>
#include <algorithm>
int main() {
  std::map<std::string, std::vector<int>> m;
  for (int i = 0; i < 50000; i++) m[std::to_string(i % 997)].push_back(i);
  long total = 0;
  for (auto &kv : m) { std::sort(kv.second.rbegin(), kv.second.rend()); total += kv.second.front(); }
  std::cout << m.size() << " " << total << std::endl;
}
EOF
    run g++ -O1 -o "$tmp/work2" "$tmp/work2.cpp"
    run "$tmp/work2"
    expect_known "997 49352497" "$tmp/work2"
  fi
  ;;

git)
  need git
  export HOME="$tmp" GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_DATE="2020-01-01T00:00:00Z" \
         GIT_COMMITTER_DATE="2020-01-01T00:00:00Z"
  repo="$tmp/repo"
  mkdir -p "$repo/src" || fail "mkdir"
  i=0
  while [ $i -lt 300 ]; do
    printf 'file %d\n%s\n' $i "$(seq 1 $((i % 50 + 1)))" >"$repo/src/f$i.txt"
    i=$((i + 1))
  done
  run git -C "$repo" init -q
  run git -C "$repo" config user.email t@example.com
  run git -C "$repo" config user.name test
  run git -C "$repo" add -A
  run git -C "$repo" commit -q -m first
  i=0
  while [ $i -lt 300 ]; do
    echo "change $i" >>"$repo/src/f$i.txt"
    i=$((i + 7))
  done
  run git -C "$repo" commit -q -a -m second
  run git -C "$repo" log --oneline
  [ "$(wc -l <"$tmp/out")" -eq 2 ] || fail "git log shows $(wc -l <"$tmp/out") commits, not 2"
  run git -C "$repo" diff --stat HEAD~1 HEAD
  grep -q "43 files changed, 43 insertions" "$tmp/out" || { cat "$tmp/out" >&2; fail "git diff --stat"; }
  run git -C "$repo" gc -q --aggressive
  run git -C "$repo" fsck --strict
  run git -C "$repo" count-objects -v
  grep -q "^count: 0" "$tmp/out" || { cat "$tmp/out" >&2; fail "loose objects left after gc"; }
  run git -C "$repo" rev-list --count HEAD
  expect_text 2
  ;;

sqlite3)
  need sqlite3 awk
  awk 'BEGIN {
    print "create table t(id integer primary key, name text, v real);";
    print "begin;";
    for (i = 1; i <= 50000; i++) printf "insert into t values(%d, %cname%d%c, %d.5);\n", i, 39, i, 39, i;
    print "commit;";
    print "create index ti on t(name);";
    print "select count(*), sum(id), sum(v), max(length(name)) from t;";
    print "select count(*) from t where name like \047name1%\047;";
    print "select group_concat(id) from (select id from t order by name desc limit 3);";
    print "delete from t where id % 2 = 0;";
    print "vacuum;";
    print "select count(*), sum(id) from t;";
  }' >"$tmp/work.sql" || fail "awk"
  run sqlite3 "$tmp/t.db" ".read $tmp/work.sql"
  expect_text "50000|1250025000|1250050000.0|9
11111
9999,9998,9997
25000|625000000"
  ;;

*)
  echo "unknown program '$prog' (python, perl, gcc, git, sqlite3)" >&2
  exit 2
  ;;
esac

echo "ok   programs_$prog${LD_PRELOAD:+ (LD_PRELOAD=$LD_PRELOAD)}"
exit 0
