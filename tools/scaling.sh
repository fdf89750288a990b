#!/usr/bin/env bash
# scaling.sh — the thread workloads at several thread counts under Locus and its peers.
#
# For a many-core machine (the 2-core development VM cannot show scaling). Each workload runs
# at every thread count under every allocator, repetitions interleaved (allocator innermost,
# so drift in the machine hits all allocators alike), until the repetitions are done or the
# deadline passes; every run's wall, user and system seconds go to OUT/scaling.csv as they
# come, so a run cut short still leaves its data. A last pass runs Locus with LOCUS_STATS=1
# at the largest thread count and keeps its statistics (lock waits, heaps, system calls).
#
# Plain bash, not a lab command: a many-core machine may have no way to install the lab (no
# network, another Python). The peers' library names are the lab's (lab/locus_lab/allocators.py,
# `PEERS`); keep the two lists alike.
#
# usage: tools/scaling.sh OUT [--threads 1,4,8,16] [--reps N] [--deadline SECONDS]
#                             [--build DIR] [--peers DIR]
# Peers are taken from --peers DIR (libjemalloc.so.2, libtcmalloc_minimal.so.4,
# libmimalloc.so.2) or from the system's library path; a missing one is skipped.
#
# Two kinds of workload (see each program's header): in `strong` ones the total work is
# fixed and split over the threads (ideal: time falls as 1/threads); in `weak` ones every
# thread does the same work (ideal: time stays flat). prodcons counts pairs: threads = 2 x pairs.
set -u

die() { echo "scaling.sh: $*" >&2; exit 2; }

[ $# -ge 1 ] || die "usage: tools/scaling.sh OUT [--threads 1,4,8,16] [--reps N] [--deadline S] [--build DIR] [--peers DIR]"
out=$1; shift
threads=1,4,8,16; reps=3; deadline=600; build=build; peers=
while [ $# -gt 0 ]; do
  case $1 in
    --threads) threads=${2:?}; shift 2 ;;
    --reps) reps=${2:?}; shift 2 ;;
    --deadline) deadline=${2:?}; shift 2 ;;
    --build) build=${2:?}; shift 2 ;;
    --peers) peers=${2:?}; shift 2 ;;
    *) die "unknown option '$1'" ;;
  esac
done
[[ $threads =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--threads takes a list like 1,4,8,16"
[[ $reps =~ ^[1-9][0-9]*$ ]] || die "--reps takes a positive number"
[[ $deadline =~ ^[1-9][0-9]*$ ]] || die "--deadline takes seconds"
[ -x "$build/bench/turnover" ] || die "no benchmarks in $build/bench (build first)"
[ -f "$build/lib/liblocus.so" ] || die "no $build/lib/liblocus.so (build first)"
mkdir -p "$out" || die "cannot create $out"

find_peer() {   # find_peer FILE: its path in --peers or the library path, or nothing
  if [ -n "$peers" ] && [ -f "$peers/$1" ]; then echo "$(cd "$peers" && pwd)/$1"; return; fi
  ldconfig -p 2>/dev/null | awk -v f="$1" '$1 == f && /x86-64/ { print $NF; exit }'
}
names=(glibc locus); libs=("" "$(cd "$build/lib" && pwd)/liblocus.so")
for p in jemalloc:libjemalloc.so.2 tcmalloc:libtcmalloc_minimal.so.4 mimalloc:libmimalloc.so.2; do
  path=$(find_peer "${p#*:}")
  if [ -n "$path" ]; then names+=("${p%%:*}"); libs+=("$path"); else echo "skipping ${p%%:*}: not found" >&2; fi
done

# workload and kind; every one runs at scale 1: `PROGRAM 1 THREADS`
workloads=(
  "turnover strong" "xlarge strong" "prodcons strong" "larson strong" "xthreads strong"
  "localarrays weak" "randsmall weak" "threads2 weak"
)

{ echo "# $(date -u +%FT%TZ) $(uname -r) cores=$(nproc)"
  grep -m1 "model name" /proc/cpuinfo 2>/dev/null
  for i in "${!names[@]}"; do echo "# ${names[$i]} ${libs[$i]:-(system)}"; done; } > "$out/machine.txt"
csv=$out/scaling.csv
echo "rep,workload,kind,threads,allocator,wall_s,user_s,sys_s,status" > "$csv"

start=$SECONDS
IFS=, read -ra counts <<< "$threads"
TIMEFORMAT='%R,%U,%S'
for ((rep = 1; rep <= reps; rep++)); do
  for w in "${workloads[@]}"; do
    read -r prog kind <<< "$w"
    for n in "${counts[@]}"; do
      arg=$n; shown=$n
      if [ "$prog" = prodcons ]; then arg=$(( (n + 1) / 2 )); shown=$(( 2 * arg )); fi
      for i in "${!names[@]}"; do
        (( SECONDS - start < deadline )) || { echo "deadline reached in repetition $rep" >&2; break 4; }
        t=$( { time LD_PRELOAD=${libs[$i]} timeout 60 "$build/bench/$prog" 1 $arg \
                 > /dev/null 2> "$out/last.err"; } 2>&1 )
        status=$?
        # `time` prints its line after the program's exit; keep only that line
        echo "$rep,$prog,$kind,$shown,${names[$i]},${t##*$'\n'},$status" >> "$csv"
      done
    done
  done
done
rm -f "$out/last.err"

top=${counts[${#counts[@]}-1]}
for w in "${workloads[@]}"; do
  read -r prog kind <<< "$w"
  arg=$top; [ "$prog" = prodcons ] && arg=$(( (top + 1) / 2 ))
  echo "== $prog 1 $arg" >> "$out/locus_stats.txt"
  LD_PRELOAD=${libs[1]} LOCUS_STATS=1 timeout 60 "$build/bench/$prog" 1 $arg \
    2>> "$out/locus_stats.txt" > /dev/null
done
echo "scaling.sh: $(( $(wc -l < "$csv") - 1 )) runs in $(( SECONDS - start )) s; $csv"
