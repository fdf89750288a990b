"""The verdict's three outcomes on synthetic runs: a clear winner, a tie within the noise, a
failed run; and the same lines in the console, report.md and summary.json."""
import io
import json

import pytest
from rich.console import Console

from locus_lab import report, results
from locus_lab.stats import rank_with_noise


def meta_for(allocators, workloads):
    return {"baseline": allocators[0], "repetitions": 3, "machine": {"cores": 2},
            "allocators": [{"name": a, "kind": "peer", "library": None} for a in allocators],
            "workloads": [{"name": w, "argv": ["/bin/true"], "kind": "bench"}
                          for w in workloads]}


def runs_of(table, status=None):
    """table: (workload, allocator) -> [(wall, maxrss_kib) per repetition]."""
    out = []
    for (w, a), reps in table.items():
        for i, (wall, rss) in enumerate(reps):
            out.append({"kind": "time", "workload": w, "allocator": a, "rep": i,
                        "status": (status or {}).get((w, a, i), "ok"), "wall_s": wall,
                        "maxrss_kib": rss})
    return out


def test_rank_with_noise():
    clear = rank_with_noise({"a": [1.0, 1.1, 1.05], "b": [1.2, 1.3, 1.25]})
    assert (clear["best"], clear["next"], clear["clear"]) == ("a", "b", True)
    assert clear["margin_pct"] == pytest.approx(100 * (1.25 - 1.05) / 1.25)
    tie = rank_with_noise({"a": [1.0, 1.3, 1.05], "b": [1.2, 1.1, 1.25], "c": [2, 2, 2]})
    assert (tie["best"], tie["clear"], tie["tied"]) == ("a", False, ["a", "b"])
    one = rank_with_noise({"a": [1.0], "b": [2.0]})
    assert (one["judged"], one["clear"]) == (False, False)
    assert rank_with_noise({"a": [], "b": [None]}) is None


def test_clear_winner(tmp_path):
    # fast is 20% ahead of glibc on both workloads in every repetition; glibc is smaller.
    table = {("churn", "glibc"): [(1.0, 1000), (1.02, 1000), (0.98, 1010)],
             ("churn", "fast"): [(0.8, 1300), (0.81, 1300), (0.79, 1300)],
             ("linked", "glibc"): [(2.0, 5000), (2.05, 5000), (1.95, 5000)],
             ("linked", "fast"): [(1.6, 6000), (1.62, 6000), (1.58, 6000)]}
    meta = meta_for(["glibc", "fast"], ["churn", "linked"])
    s = results.summarise(meta, runs_of(table))
    v = s["verdict"]
    assert v["fastest"] == "fast" and v["time"]["clear"]
    assert v["time"]["margin_pct"] == pytest.approx(20, abs=0.5)
    assert v["smallest"] == "glibc" and v["memory"]["clear"]
    assert v["lines"][0] == ("fastest: fast (0.80x glibc's time), 20% ahead of glibc (beyond "
                             "the spread of 3 runs; geometric mean over 2 workloads)")
    assert v["lines"][1].startswith("smallest peak memory: glibc, ")
    assert "below fast (beyond the spread of 3 runs" in v["lines"][1]
    assert "both faster and smaller than: fast, glibc" in v["lines"][2]
    # the same lines at the end of the console output, in report.md and summary.json
    buf = io.StringIO()
    report.print_summary(Console(file=buf, width=200), s, meta)
    tail = buf.getvalue().rstrip().splitlines()
    assert [t.strip() for t in tail[-len(v["lines"]):]] == v["lines"]
    report.write_all(tmp_path, s, meta, results.rows(s), [], plots=False)
    md = (tmp_path / "report.md").read_text()
    assert all(f"- {line}" in md for line in v["lines"])
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["verdict"]["lines"] == v["lines"]
    assert data["verdict"]["time"]["best"] == "fast"


def test_tie_within_noise():
    # b's median is 2% lower, but its runs overlap a's: no difference beyond noise.
    table = {("prog", "a"): [(1.00, 1000), (1.10, 1000), (0.95, 1000)],
             ("prog", "b"): [(0.98, 1000), (0.90, 1000), (1.08, 1000)]}
    s = results.summarise(meta_for(["a", "b"], ["prog"]), runs_of(table))
    v = s["verdict"]
    assert v["time"]["clear"] is False and v["time"]["tied"] == ["b", "a"]
    assert v["time"]["ahead_in"] == 2  # 0.98 < 1.00, 0.90 < 1.10, 1.08 > 0.95
    assert v["lines"][0] == ("fastest: no difference beyond noise between b and a (their "
                             "ranges over 3 runs overlap; by the medians b (0.98x a's time) is "
                             "2% ahead of a, in 2 of 3 repetitions)")
    assert v["lines"][1].startswith("smallest peak memory: no difference beyond noise")


def test_failed_run_is_left_out():
    # crashy would be fastest, but one of its runs crashed: it is out of the verdict.
    table = {("prog", "glibc"): [(1.0, 1000), (1.01, 1000), (0.99, 1000)],
             ("prog", "crashy"): [(0.5, 900), (0.5, 900), (0.5, 900)],
             ("prog", "slow"): [(1.5, 1200), (1.52, 1200), (1.49, 1200)]}
    runs = runs_of(table, status={("prog", "crashy", 1): "SIGSEGV"})
    s = results.summarise(meta_for(["glibc", "crashy", "slow"], ["prog"]), runs)
    v = s["verdict"]
    assert v["failed"] == {"crashy": ["prog"]}
    assert v["fastest"] == "glibc" and v["time"]["next"] == "slow" and v["time"]["clear"]
    assert v["lines"][0] == ("fastest: glibc, 33% ahead of slow (beyond the spread of 3 runs)")
    assert v["lines"][-1] == "failed: crashy on prog (left out of the verdict; see the table)"


def test_one_run_is_not_judged():
    table = {("prog", "glibc"): [(1.0, 1000)], ("prog", "fast"): [(0.5, 1000)]}
    s = results.summarise(meta_for(["glibc", "fast"], ["prog"]), runs_of(table))
    assert "one run each: too few to tell" in s["verdict"]["lines"][0]


def test_plots_split_many_allocators(tmp_path):
    six = ["glibc", "a", "b", "c", "d", "e"]
    assert report.series_groups(six, "glibc") == [six]
    many = ["glibc"] + [f"x{i}" for i in range(17)]
    groups = report.series_groups(many, "glibc")
    assert len(groups) == 3 and all(g[0] == "glibc" and len(g) <= report.MAX_SERIES
                                    for g in groups)
    assert sorted(a for g in groups for a in g[1:]) == sorted(many[1:])
    table = {("prog", a): [(1.0 + i / 100, 1000 + i)] for i, a in enumerate(many)}
    s = results.summarise(meta_for(many, ["prog"]), runs_of(table))
    assert report.plot_all(tmp_path, s) == ["time.png", "memory.png"]
    assert (tmp_path / "time.png").stat().st_size > 10000
