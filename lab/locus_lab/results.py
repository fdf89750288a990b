"""The results folder: raw per-run data in, summary out.

Raw data is the source of truth and is never rewritten by `locus report`:
  meta.json    what was run: allocators, workloads, options, machine
  runs.jsonl   one JSON object per run, appended as runs finish ("kind": "time", "cache",
               "perf" or "live")
Everything else (summary.csv/json, plots, report.md) is derived from these two files.
"""
from __future__ import annotations

import json
from pathlib import Path

from .common import LabError
from .stats import geomean, median, overall_status, rank_with_noise, ratio, spread_pct
from .suite import MANY_THREADS, SCALING_ONE, SCALING_TWO

META_FILE = "meta.json"
RUNS_FILE = "runs.jsonl"
FORMAT_VERSION = 1
DERIVED_FILES = ("report.md", "summary.csv", "summary.json", "runs.csv", "time.png",
                 "memory.png", "frag.png", "cache.png",
                 # `--suite regions` (regions.py)
                 "regions_time.png", "regions_memory.png", "regions_profile.png",
                 # `locus replay` (replay.py)
                 "heap_profile.png")

TIME_METRICS = ("wall_s", "user_s", "sys_s", "maxrss_kib", "peak_anon_kib", "minflt", "majflt")
NORMALISED = {"wall_s": "wall_norm", "user_s": "user_norm", "sys_s": "sys_norm",
              "maxrss_kib": "maxrss_norm", "peak_anon_kib": "peak_anon_norm",
              "minflt": "minflt_norm"}
CACHE_METRICS = ("instructions", "l1_misses", "l1d_misses", "ll_misses", "lld_misses")
PERF_METRICS = ("instructions", "cycles", "l1_dcache_load_misses", "llc_load_misses",
                "dtlb_load_misses")


class ResultsWriter:
    """Appends run records as they finish, so an interrupted comparison keeps its data."""

    def __init__(self, folder: Path, meta: dict):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        # A folder reused from an earlier comparison must not mix old files into this one.
        for stale in DERIVED_FILES + (RUNS_FILE,):
            (folder / stale).unlink(missing_ok=True)
        meta["format_version"] = FORMAT_VERSION
        self.meta = meta  # the caller's dict: later changes are saved by write_meta()
        self.write_meta()
        self._runs = open(folder / RUNS_FILE, "a")

    def write_meta(self) -> None:
        (self.folder / META_FILE).write_text(json.dumps(self.meta, indent=2) + "\n")

    def add(self, record: dict) -> None:
        self._runs.write(json.dumps(record) + "\n")
        self._runs.flush()

    @property
    def closed(self) -> bool:
        return self._runs.closed

    def close(self) -> None:
        self._runs.close()


def load(folder) -> tuple[dict, list]:
    folder = Path(folder)
    if not folder.is_dir():
        raise LabError(f"no such results folder: {folder}")
    try:
        meta = json.loads((folder / META_FILE).read_text())
    except FileNotFoundError:
        raise LabError(f"{folder} has no {META_FILE}: not a `locus compare` results folder") from None
    except (OSError, ValueError) as e:
        raise LabError(f"cannot read {folder / META_FILE}: {e}") from None
    runs = []
    try:
        with open(folder / RUNS_FILE) as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    runs.append(json.loads(line))
                except ValueError:
                    raise LabError(f"{folder / RUNS_FILE}:{n}: not JSON") from None
    except FileNotFoundError:
        raise LabError(f"{folder} has no {RUNS_FILE}") from None
    return meta, runs


# ---- summary ----------------------------------------------------------------------------------

def summarise(meta: dict, runs: list) -> dict:
    """Medians per (workload, allocator), normalised to the baseline, plus geometric means,
    two-thread scaling and a verdict. A cell is "ok" only when every repetition ended with
    status 0. Workloads with "in_geomean": false in meta are summarised like the others but
    left out of the geometric means."""
    allocators = [a["name"] for a in meta.get("allocators", [])]
    workloads = [w["name"] for w in meta.get("workloads", [])]
    baseline = meta.get("baseline") or (allocators[0] if allocators else None)

    no_frag = {w["name"] for w in meta.get("workloads", []) if w.get("frag") is False}
    # Folders made before the field existed have every workload in the geometric means.
    excluded = [w["name"] for w in meta.get("workloads", []) if w.get("in_geomean") is False]
    live = {}
    for r in runs:
        if r.get("kind") == "live" and r.get("peak_live_bytes"):
            live[r["workload"]] = r

    cells = {}
    for w in workloads:
        for a in allocators:
            mine = [r for r in runs if r.get("workload") == w and r.get("allocator") == a]
            timed = [r for r in mine if r.get("kind") == "time"]
            ok = [r for r in timed if r.get("status") == "ok"]
            cell = {"workload": w, "allocator": a, "runs": len(timed), "ok_runs": len(ok),
                    "status": overall_status([r.get("status") for r in timed]),
                    "in_geomean": w not in excluded}
            for m in TIME_METRICS:
                vals = [r.get(m) for r in ok]
                cell[m] = median(vals)
                if m == "wall_s" and vals:
                    cell["wall_min_s"] = min(vals)
                    cell["wall_max_s"] = max(vals)
                    cell["wall_spread_pct"] = spread_pct(vals, cell[m])
            if cell["status"] != "ok":
                cell["failure"] = next((r.get("stderr_tail", "") for r in timed
                                        if r.get("status") != "ok"), "")
            lv = live.get(w)
            cell["peak_live_bytes"] = lv.get("peak_live_bytes") if lv else None
            # frag: seed 000's (peak anonymous memory / peak live bytes); frag_rss: seed 002's
            # (peak RSS, all the memory the process holds from the OS, / peak live bytes)
            cell["frag"] = cell["frag_rss"] = None
            if lv and cell["status"] == "ok" and w not in no_frag:
                cell["frag"] = ratio((cell["peak_anon_kib"] or 0) * 1024 or None,
                                      lv["peak_live_bytes"])
                cell["frag_rss"] = ratio((cell["maxrss_kib"] or 0) * 1024 or None,
                                          lv["peak_live_bytes"])
            cache = next((r for r in mine if r.get("kind") == "cache"), None)
            if cache:
                cell["cache_status"] = cache.get("status")
                for m in CACHE_METRICS:
                    cell[m] = cache.get(m) if cache.get("status") == "ok" else None
            perf = next((r for r in mine if r.get("kind") == "perf"), None)
            if perf:
                for m in PERF_METRICS:
                    cell["perf_" + m] = perf.get(m) if perf.get("status") == "ok" else None
            cells[(w, a)] = cell

    # Normalise to the baseline on the same workload.
    for (w, a), cell in cells.items():
        base = cells.get((w, baseline), {})
        both_ok = cell["status"] == "ok" and base.get("status") == "ok"
        for m, norm in NORMALISED.items():
            cell[norm] = ratio(cell.get(m), base.get(m)) if both_ok else None
        for m in CACHE_METRICS:
            if m in cell:
                cell[m + "_norm"] = ratio(cell.get(m), base.get(m))
        for m in PERF_METRICS:
            if "perf_" + m in cell:
                cell["perf_" + m + "_norm"] = ratio(cell.get("perf_" + m), base.get("perf_" + m))

    scaling = two_thread_scaling(cells, allocators)
    for a, s in scaling.items():
        cells[(SCALING_TWO, a)]["scaling"] = s["scaling"]
    many = many_thread(cells, allocators)
    for a, m in many.items():
        for name, r in m["runs"].items():
            cells[(name, a)]["vs_threads2"] = r["ratio"]

    means = {}
    for a in allocators:
        mine = [cells[(w, a)] for w in workloads]
        counted = [c for c in mine if c["in_geomean"]]
        entry = {"workloads": len(workloads), "in_geomean": len(counted),
                 "ok": sum(1 for c in mine if c["status"] == "ok"),
                 # A failure still disqualifies an allocator, geometric mean or not.
                 "failed": [c["workload"] for c in mine if c["status"] != "ok"]}
        for key in ("wall_norm", "user_norm", "maxrss_norm", "peak_anon_norm", "minflt_norm",
                    "frag", "frag_rss", "instructions_norm", "l1_misses_norm",
                    "ll_misses_norm"):
            entry[key] = geomean(c.get(key) for c in counted)
        spreads = [c.get("wall_spread_pct") for c in mine if c.get("wall_spread_pct") is not None]
        entry["wall_spread_pct_median"] = median(spreads)
        means[a] = entry

    counted = [w for w in workloads if w not in excluded
               and cells.get((w, baseline), {}).get("status") == "ok"]
    return {"baseline": baseline, "allocators": allocators, "workloads": workloads,
            "not_in_geomean": [w for w in workloads if w in excluded],
            "cells": cells, "geomean": means, "scaling": scaling, "many_threads": many,
            "live": live,
            "verdict": verdict(baseline, allocators, means, {
                key: repetition_scores(runs, cells, counted, baseline, allocators, metric)
                for key, metric, *_ in DECISIONS})}


def two_thread_scaling(cells: dict, allocators: list) -> dict:
    """Per allocator, 2 * T1 / T2 from the median wall times of threads2 on one thread (T1)
    and on two (T2): each thread does the same work, so two threads on two idle cores finish
    in T1 and the scaling is 2.0; 1.0 means the second thread bought nothing. Allocators for
    which either workload did not run, or failed, are left out."""
    out = {}
    for a in allocators:
        t1 = _ok_wall(cells.get((SCALING_ONE, a)))
        t2 = _ok_wall(cells.get((SCALING_TWO, a)))
        if t1 and t2:
            out[a] = {"t1_s": t1, "t2_s": t2, "scaling": 2.0 * t1 / t2}
    return out


def _ok_wall(cell) -> float | None:
    """The median wall time of a cell that ran without failing, else None."""
    if not cell or cell["status"] != "ok":
        return None
    return cell.get("wall_s") or None


def many_thread(cells: dict, allocators: list) -> dict:
    """Per allocator, the many-thread workloads (threads2's loop with the total work of
    threads2 split over N threads) against threads2: ratio = T_N / T_2 from the median wall
    times, the cost of the same work done by N threads instead of two (1.00 = no cost; on
    two cores, more threads can only add switching, contention and cache misses). Allocators
    without a good threads2, or without any good many-thread run, are left out, as are the
    runs that failed."""
    out = {}
    for a in allocators:
        t2 = _ok_wall(cells.get((SCALING_TWO, a)))
        if not t2:
            continue
        runs = {}
        for name, n in MANY_THREADS.items():
            tn = _ok_wall(cells.get((name, a)))
            if tn:
                runs[name] = {"threads": n, "t_s": tn, "ratio": tn / t2}
        if runs:
            out[a] = {"t2_s": t2, "runs": runs}
    return out


def repetition_scores(runs: list, cells: dict, counted: list, baseline: str,
                      allocators: list, metric: str) -> dict:
    """Per allocator, one figure per repetition: the geometric mean over the `counted`
    workloads of that repetition's run (its `metric`) over the baseline's median on the same
    workload. A repetition in which the allocator lacks a good run of a counted workload
    gives no figure. For one workload it is simply the run over the baseline's median."""
    out = {}
    for a in allocators:
        by_rep = {}
        for r in runs:
            if (r.get("kind") == "time" and r.get("allocator") == a and r.get("status") == "ok"
                    and r.get("workload") in counted):
                by_rep.setdefault(r.get("rep", 0), {})[r["workload"]] = r.get(metric)
        scores = []
        for _, got in sorted(by_rep.items()):
            norms = [ratio(got.get(w), cells[(w, baseline)].get(metric)) for w in counted]
            if norms and all(norms):
                scores.append(geomean(norms))
        out[a] = scores
    return out


# (key in the verdict, metric of the runs, what the line calls the winner, how it leads)
DECISIONS = (("time", "wall_s", "fastest", "ahead of", "time"),
             ("memory", "maxrss_kib", "smallest peak memory", "below", "peak RSS"))


def verdict(baseline: str, allocators: list, means: dict, scores: dict | None = None) -> dict:
    """Which allocator to ship, and whether the difference is beyond the noise: for time and
    for peak memory, the best among the allocators that ran every workload without failing,
    judged on the per-repetition figures (stats.rank_with_noise); the ones no other beats on
    both (by the geometric means); the failures."""
    scores = scores or {}
    clean = [a for a in allocators if not means[a]["failed"] and means[a]["ok"]]
    out = {"fastest": None, "smallest": None, "least_fragmentation": None, "pareto": [],
           "failed": {a: means[a]["failed"] for a in allocators if means[a]["failed"]},
           "lines": []}

    def best(key):
        cands = [a for a in clean if means[a].get(key) is not None]
        return min(cands, key=lambda a: means[a][key]) if cands else None

    out["least_fragmentation"] = best("frag")
    both = [a for a in clean if means[a].get("wall_norm") and means[a].get("maxrss_norm")]
    for a in both:
        ta, ma = means[a]["wall_norm"], means[a]["maxrss_norm"]
        dominated = any(means[b]["wall_norm"] <= ta and means[b]["maxrss_norm"] <= ma and
                        (means[b]["wall_norm"] < ta or means[b]["maxrss_norm"] < ma)
                        for b in both if b != a)
        if not dominated:
            out["pareto"].append(a)
    out["pareto"].sort(key=lambda a: means[a]["wall_norm"])

    lines = out["lines"]
    n = max((means[a]["in_geomean"] for a in allocators), default=0)
    over = f"; geometric mean over {n} workloads" if n > 1 else ""
    for key, metric, title, lead, unit in DECISIONS:
        norm = {"time": "wall_norm", "memory": "maxrss_norm"}[key]
        samples = {a: scores.get(key, {}).get(a) or ([means[a][norm]] if means[a].get(norm)
                                                      else []) for a in clean}
        dec = rank_with_noise(samples)
        if dec and dec["next"] and len(samples[dec["best"]]) == len(samples[dec["next"]]) > 1:
            # repetitions were run side by side: in how many was the best ahead?
            dec["ahead_in"] = sum(b < n for b, n in zip(samples[dec["best"]],
                                                       samples[dec["next"]]))
        out[key] = dec
        out["fastest" if key == "time" else "smallest"] = dec["best"] if dec else None
        if dec is None or len(allocators) < 2:
            continue
        lines.append(_decision_line(title, lead, unit, dec, baseline, means[dec["best"]][norm],
                                    over))
    if len(out["pareto"]) > 1 and out["fastest"] != out["smallest"]:
        lines.append("no other allocator is both faster and smaller than: "
                     + ", ".join(out["pareto"]) + " (pick by whether time or memory matters "
                     "more)")
    for a, failed in out["failed"].items():
        lines.append(f"failed: {a} on {', '.join(failed)} (left out of the verdict; see the "
                     "table)")
    return out


def _pct(v: float) -> str:
    return f"{v:.1f}%" if abs(v) < 1 else f"{v:.0f}%"


def _decision_line(title, lead, unit, dec, baseline, norm, over) -> str:
    best, nxt = dec["best"], dec["next"]
    vs_base = (f" ({norm:.2f}x {baseline}'s {unit})" if best != baseline and norm else "")
    if nxt is None:
        return f"{title}: {best}{vs_base}, the only allocator that completed every run"
    runs = dec["runs"]
    ahead = f"{_pct(dec['margin_pct'])} {lead} {nxt}"
    if not dec["judged"]:
        return (f"{title}: {best}{vs_base}, {ahead} (one run each: too few to tell a "
                f"difference from noise, use -r 3 or more{over})")
    if dec["clear"]:
        return f"{title}: {best}{vs_base}, {ahead} (beyond the spread of {runs} runs{over})"
    tied = dec["tied"]
    names = ", ".join(tied[:-1]) + " and " + tied[-1]
    won = (f", in {dec['ahead_in']} of {runs} repetitions" if dec.get("ahead_in") is not None
           else "")
    return (f"{title}: no difference beyond noise between {names} (their ranges over "
            f"{runs} runs overlap; by the medians {best}{vs_base} is {ahead}{won}{over})")


def rows(summary: dict) -> list:
    """The cells as a list of flat dicts, in table order (for CSV and JSON)."""
    out = []
    for w in summary["workloads"]:
        for a in summary["allocators"]:
            out.append(dict(summary["cells"][(w, a)]))
    return out
