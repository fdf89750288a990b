"""results.summarise on synthetic runs: two-thread scaling, many-thread ratios and what the
geometric means count, worked out by hand; and that the reports draw them (or do without)."""
import io
import json
import math

import pytest
from rich.console import Console

from locus_lab import report, results


def workload(name, in_geomean=None):
    w = {"name": name, "argv": ["/bin/true"], "kind": "bench"}
    if in_geomean is not None:  # absent, as in folders made before the field existed
        w["in_geomean"] = in_geomean
    return w


def meta_for(allocators, workloads):
    return {"baseline": allocators[0],
            "allocators": [{"name": a, "kind": "peer", "library": None} for a in allocators],
            "workloads": workloads, "machine": {"cores": 2}, "repetitions": 3}


def timed(w, a, *walls, status="ok"):
    return [{"kind": "time", "workload": w, "allocator": a, "rep": i, "status": status,
             "wall_s": t, "maxrss_kib": 1000} for i, t in enumerate(walls)]


SUITE = [workload("churn", True), workload("threads1", False), workload("threads2", True)]


def test_scaling_is_twice_the_ratio_of_medians():
    runs = (timed("churn", "glibc", 1.0, 1.0, 1.0) + timed("churn", "fast", 0.5, 0.5, 0.5)
            # medians: threads1 1.0 / 0.8, threads2 1.25 / 0.8 (outliers do not count)
            + timed("threads1", "glibc", 1.0, 0.9, 5.0) + timed("threads1", "fast", 0.8, 0.8, 0.1)
            + timed("threads2", "glibc", 1.25, 1.2, 1.3) + timed("threads2", "fast", 0.8, 9, 0.7))
    s = results.summarise(meta_for(["glibc", "fast"], SUITE), runs)
    assert s["scaling"]["glibc"] == pytest.approx({"t1_s": 1.0, "t2_s": 1.25, "scaling": 1.6})
    assert s["scaling"]["fast"]["scaling"] == pytest.approx(2.0)
    assert s["cells"][("threads2", "glibc")]["scaling"] == pytest.approx(1.6)
    assert "scaling" not in s["cells"][("threads1", "glibc")]


def test_threads1_is_shown_but_not_in_the_geomean():
    # fast: churn 0.5x, threads2 0.8x, threads1 0.01x (which would drag the mean down).
    runs = (timed("churn", "glibc", 1.0) + timed("churn", "fast", 0.5)
            + timed("threads1", "glibc", 1.0) + timed("threads1", "fast", 0.01)
            + timed("threads2", "glibc", 1.0) + timed("threads2", "fast", 0.8))
    s = results.summarise(meta_for(["glibc", "fast"], SUITE), runs)
    assert s["not_in_geomean"] == ["threads1"]
    assert s["cells"][("threads1", "fast")]["wall_norm"] == pytest.approx(0.01)
    assert s["cells"][("threads1", "fast")]["in_geomean"] is False
    fast = s["geomean"]["fast"]
    assert fast["wall_norm"] == pytest.approx(math.sqrt(0.5 * 0.8))
    assert fast["maxrss_norm"] == pytest.approx(1.0)
    assert (fast["workloads"], fast["in_geomean"]) == (3, 2)
    assert "geometric mean over 2 workloads" in s["verdict"]["lines"][0]


def test_no_scaling_without_both_workloads_ok():
    runs = (timed("threads1", "glibc", 1.0) + timed("threads2", "glibc", 1.0)
            + timed("threads1", "crashy", 1.0) + timed("threads2", "crashy", 1.0, status="SIGSEGV")
            + timed("threads1", "partial", 1.0))  # threads2 never ran: "not run"
    workloads = [workload("threads1", False), workload("threads2", True)]
    s = results.summarise(meta_for(["glibc", "crashy", "partial"], workloads), runs)
    assert list(s["scaling"]) == ["glibc"]
    assert s["scaling"]["glibc"]["scaling"] == pytest.approx(2.0)
    # threads2 on its own: nothing to divide by.
    s = results.summarise(meta_for(["glibc"], [workload("threads2")]),
                          timed("threads2", "glibc", 1.0))
    assert s["scaling"] == {}


def test_old_folders_count_every_workload(tmp_path):
    """Results made before threads1 and in_geomean existed load and report as before."""
    old = [workload("churn"), workload("threads2")]
    runs = (timed("churn", "glibc", 1.0) + timed("churn", "fast", 0.5)
            + timed("threads2", "glibc", 1.0) + timed("threads2", "fast", 0.8))
    meta = meta_for(["glibc", "fast"], old)
    s = results.summarise(meta, runs)
    assert s["not_in_geomean"] == [] and s["scaling"] == {}
    assert s["geomean"]["fast"]["wall_norm"] == pytest.approx(math.sqrt(0.5 * 0.8))
    text = draw(tmp_path, meta, s)
    assert "Two-thread scaling" not in text and "†" not in text
    assert "geomean" in text


def test_reports_show_the_scaling_table(tmp_path):
    runs = (timed("churn", "glibc", 1.0) + timed("churn", "fast", 0.5)
            + timed("threads1", "glibc", 1.0) + timed("threads1", "fast", 0.8)
            + timed("threads2", "glibc", 1.25) + timed("threads2", "fast", 0.8))
    meta = meta_for(["glibc", "fast"], SUITE)
    s = results.summarise(meta, runs)
    text = draw(tmp_path, meta, s)
    assert "threads1 †" in text and "not in the geomean: threads1" in text
    md = (tmp_path / "report.md").read_text()
    assert "## Two-thread scaling" in md and "| glibc | 1.00 s | 1.25 s | 1.60 |" in md
    assert "Measured on 2 cores" in md and "two idle cores" in md
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["scaling"]["fast"]["scaling"] == pytest.approx(2.0)
    assert data["not_in_geomean"] == ["threads1"]


def test_many_threads_against_threads2(tmp_path):
    """threads8/threads16 (threads2's total work over N threads): T_N / T_2 per allocator,
    shown in a table, left out of the geometric means, failed runs left out."""
    suite = SUITE + [workload("threads8", False), workload("threads16", False)]
    runs = (timed("churn", "glibc", 1.0) + timed("churn", "fast", 0.5)
            + timed("threads1", "glibc", 1.0) + timed("threads1", "fast", 0.8)
            + timed("threads2", "glibc", 1.0, 1.2, 0.8) + timed("threads2", "fast", 0.8)
            + timed("threads8", "glibc", 1.5, 1.4, 1.6) + timed("threads8", "fast", 0.4)
            + timed("threads16", "glibc", 2.0) + timed("threads16", "fast", 1.0, status="SIGSEGV"))
    meta = meta_for(["glibc", "fast"], suite)
    s = results.summarise(meta, runs)
    assert s["many_threads"]["glibc"]["t2_s"] == pytest.approx(1.0)
    assert s["many_threads"]["glibc"]["runs"]["threads8"] == pytest.approx(
        {"threads": 8, "t_s": 1.5, "ratio": 1.5})
    assert s["many_threads"]["glibc"]["runs"]["threads16"]["ratio"] == pytest.approx(2.0)
    assert list(s["many_threads"]["fast"]["runs"]) == ["threads8"]
    assert s["cells"][("threads8", "fast")]["vs_threads2"] == pytest.approx(0.5)
    assert "vs_threads2" not in s["cells"][("threads16", "fast")]
    assert s["not_in_geomean"] == ["threads1", "threads8", "threads16"]
    assert s["geomean"]["fast"]["wall_norm"] == pytest.approx(math.sqrt(0.5 * 0.8))
    text = draw(tmp_path, meta, s)
    assert "Many threads" in text and "threads16 †" in text
    md = (tmp_path / "report.md").read_text()
    assert "## Many threads" in md
    assert "| glibc | 1.00 s | 1.50 s | 1.50x | 2.00 s | 2.00x |" in md
    assert "| fast | 0.80 s | 0.40 s | 0.50x | - | - |" in md
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["many_threads"]["fast"]["runs"]["threads8"]["ratio"] == pytest.approx(0.5)


def test_no_many_thread_table_without_its_workloads(tmp_path):
    runs = timed("threads2", "glibc", 1.0) + timed("threads8", "glibc", 1.0, status="exit 1")
    meta = meta_for(["glibc"], [workload("threads2"), workload("threads8", False)])
    s = results.summarise(meta, runs)
    assert s["many_threads"] == {}
    assert "Many threads" not in draw(tmp_path, meta, s)


def draw(folder, meta, summary) -> str:
    """The console output, with report.md and the summary files written into folder."""
    out = io.StringIO()
    report.print_summary(Console(file=out, width=160), summary, meta)
    report.write_all(folder, summary, meta, results.rows(summary), [], plots=False)
    return out.getvalue() + (folder / "report.md").read_text()
