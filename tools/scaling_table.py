#!/usr/bin/env python3
"""scaling_table.py — the tables of a tools/scaling.sh run, in Markdown.

usage: tools/scaling_table.py OUT/scaling.csv

For each workload: the median wall time of every allocator at every thread count, and its
scaling: time(1 thread) / time(n) for the `strong` workloads (fixed total work: n is ideal)
and the same ratio for the `weak` ones (fixed work per thread: 1.0 is ideal). The fastest
allocator at each thread count is in bold. Runs that failed (non-zero status) are left out
and counted under the table.
"""
import csv
import statistics
import sys
from collections import defaultdict

ORDER = ["glibc", "locus", "jemalloc", "tcmalloc", "mimalloc"]


def main(argv):
    if len(argv) != 2:
        print("usage: scaling_table.py OUT/scaling.csv", file=sys.stderr)
        return 2
    try:
        with open(argv[1], newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        print(f"scaling_table.py: cannot read {argv[1]}: {e.strerror}", file=sys.stderr)
        return 2
    times, kinds, failed = defaultdict(list), {}, defaultdict(int)
    workloads, allocators = [], []
    for r in rows:
        w, a = r["workload"], r["allocator"]
        if w not in workloads:
            workloads.append(w)
        if a not in allocators:
            allocators.append(a)
        kinds[w] = r["kind"]
        if r["status"] != "0":
            failed[w] += 1
            continue
        times[(w, int(r["threads"]), a)].append(float(r["wall_s"]))
    allocators.sort(key=lambda a: ORDER.index(a) if a in ORDER else len(ORDER))
    for w in workloads:
        counts = sorted({t for (x, t, _) in times if x == w})
        ideal = "n" if kinds[w] == "strong" else "1.0"
        print(f"### {w} ({kinds[w]} scaling: time(1st) / time(n), ideal {ideal})\n")
        print("| threads | " + " | ".join(allocators) + " | " + " | ".join(f"{a} scaling" for a in allocators) + " |")
        print("|---:|" + "---:|" * (2 * len(allocators)))
        base = {a: statistics.median(times[(w, counts[0], a)]) for a in allocators if times.get((w, counts[0], a))}
        for n in counts:
            med = {a: statistics.median(times[(w, n, a)]) for a in allocators if times.get((w, n, a))}
            best = min(med.values()) if med else None
            cells = [(f"**{med[a]:.3f}**" if med[a] == best else f"{med[a]:.3f}") if a in med else "–" for a in allocators]
            scale = [f"{base[a] / med[a]:.2f}" if a in med and a in base else "–" for a in allocators]
            print(f"| {n} | " + " | ".join(cells) + " | " + " | ".join(scale) + " |")
        reps = sorted({len(v) for (x, _, _), v in times.items() if x == w})
        note = f"{reps[0]}–{reps[-1]}" if len(reps) > 1 else f"{reps[0] if reps else 0}"
        print(f"\nSeconds, median of {note} run(s) each" + (f"; {failed[w]} failed run(s) left out" if failed[w] else "") + ".\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
