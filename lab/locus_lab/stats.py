"""Statistics over repeated runs, shared by every summary (results.py for compare and replay,
regions.py, hints.py): medians, ratios, geometric means, the spread of a set of times, one
status for a cell's runs, and the check that runs agree on a result that depends on the
seeds alone."""
from __future__ import annotations

import math
import statistics
from collections import Counter

WRONG_CHECKSUM = "wrong checksum"


def median(values) -> float | None:
    """The median of the values that are not None; None when there are none."""
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def ratio(a, b) -> float | None:
    """a / b, or None when either is missing or b is zero (nothing to compare against)."""
    if a is None or b is None or b == 0:
        return None
    return a / b


def geomean(values) -> float | None:
    """The geometric mean of the positive values; None when there are none."""
    vals = [v for v in values if v is not None and v > 0]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def spread_pct(values: list, middle: float | None) -> float | None:
    """(max - min) / middle in percent; None for a single run (no spread to speak of)."""
    if not middle or len(values) < 2:
        return None
    return 100.0 * (max(values) - min(values)) / middle


def overall_status(statuses: list) -> str:
    """One status for a cell's runs: "ok" when every run was, "not run" when there were none,
    the failure when all failed, else the first failure with how many failed ("exit 1 2/3")."""
    failed = [s for s in statuses if s != "ok"]
    if not statuses:
        return "not run"
    if not failed:
        return "ok"
    first = failed[0]
    return first if len(failed) == len(statuses) else f"{first} {len(failed)}/{len(statuses)}"


def flag_disagreeing(cells: dict, field: str, failure: str) -> None:
    """Cells keyed (workload, mode, allocator): where the runs of a workload disagree on
    `field` (a checksum or result line that depends on the seeds alone), the most common value
    is right and the other cells become failures (failure.format(theirs, right))."""
    for w in {key[0] for key in cells}:
        values = Counter(cell[field] for key, cell in cells.items() if key[0] == w and cell[field])
        if len(values) > 1:
            right = values.most_common(1)[0][0]
            for key, cell in cells.items():
                if key[0] == w and cell[field] and cell[field] != right:
                    cell["status"] = WRONG_CHECKSUM
                    cell["failure"] = failure.format(cell[field], right)


def rank_with_noise(samples: dict) -> dict | None:
    """Which of several candidates is lowest (faster, smaller), and whether beyond the noise.

    samples: name -> the values of its repetitions (lower is better). Candidates are ranked by
    their medians. The best is ahead of another *beyond the noise* when the two sets of
    repetitions do not overlap at all: every run of the best is below every run of the other
    (with 3 runs each, two allocators that are really equal do that by chance 1 time in 10;
    with 5, 1 in 126). With fewer than two runs there is no spread to judge by.

    Returns None without candidates, else {"best", "next" (the runner-up by median, None
    alone), "margin_pct" (how much lower the best's median is than the next's, in percent of
    the next's), "runs" (the fewest runs of a candidate), "judged" (False: too few runs to
    tell), "clear" (the best is beyond the noise of every other), "tied" (the best and those
    whose runs overlap the best's, by median)}."""
    cands = {n: [v for v in vals if v is not None] for n, vals in samples.items()}
    cands = {n: v for n, v in cands.items() if v}
    if not cands:
        return None
    order = sorted(cands, key=lambda n: (statistics.median(cands[n]), n))
    best = order[0]
    runs = min(len(v) for v in cands.values())
    judged = runs >= 2
    top = max(cands[best])
    tied = [best] + [n for n in order[1:] if min(cands[n]) <= top]
    nxt = order[1] if len(order) > 1 else None
    margin = None
    if nxt is not None:
        b, n = statistics.median(cands[best]), statistics.median(cands[nxt])
        margin = 100.0 * (n - b) / n if n else None
    return {"best": best, "next": nxt, "margin_pct": margin, "runs": runs, "judged": judged,
            "clear": judged and len(tied) == 1, "tied": tied if judged else [best]}
