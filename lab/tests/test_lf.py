"""`locus compare --suite lf` (seed 002) and seed 002's fragmentation ratio: the suite's
workloads and allocators, a quick run end to end, and the ratio worked out by hand on
synthetic runs."""
import csv
import io
import json
import os
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from locus_lab import report, results, session, suite
from locus_lab.common import Paths

from conftest import run_locus

BUILD_DIR = os.environ.get("LOCUS_TEST_BUILD_DIR")
BUILD = Path(BUILD_DIR) if BUILD_DIR else Path(__file__).resolve().parents[2] / "build"
LF = ("shbench", "espresso", "larson", "threadtest", "sites", "twophase")


def need_built(*names):
    for name in names:
        if not (BUILD / "bench" / name).is_file():
            pytest.skip(f"build/bench/{name} is not built yet")
    if not (BUILD / "lib" / "liblocus.so").is_file():
        pytest.skip("build/lib/liblocus.so is not built yet")


def test_lf_suite_has_its_four_programs_with_quick(tmp_path):
    assert tuple(b.name for b in suite.LF_BENCH) == LF
    assert suite.LF_DESIGNS == ("pow2", "lf", "vam-sites")
    paths = Paths(root=tmp_path, build=tmp_path)
    paths.bench.mkdir()
    for name in LF[:3] + LF[4:]:              # threadtest not built: skipped with a note
        (paths.bench / name).write_text("#!/bin/sh\n")
    found, notes = suite.lf_suite(paths, quick=True)
    assert [w.name for w in found] == list(LF[:3] + LF[4:])
    assert all(w.argv[1:] == ["1", "--quick"] and w.kind == "bench" for w in found)
    assert len(notes) == 1 and "threadtest" in notes[0]
    assert {w.name for w in suite.default_suite(paths, quick=True)[0]}.isdisjoint(LF)


def test_lf_suite_takes_no_command():
    r = run_locus("compare", "--suite", "lf", "--", "/bin/true")
    assert r.returncode == 2 and "no command" in r.stderr


def fake_build(tmp_path, designs):
    """A build folder whose variants.json lists liblocus.so and copies of it under the given
    designs (what the pow2 and lf libraries will look like once built)."""
    build = tmp_path / "build"
    (build / "lib").mkdir(parents=True)
    for sub in ("bench", "tools"):
        (build / sub).symlink_to(BUILD / sub)
    shutil.copy(BUILD / "lib" / "liblocus.so", build / "lib" / "liblocus.so")
    entries = [{"name": "vam", "file": "build/lib/liblocus.so", "design": "vam"}]
    for name, design in designs:
        shutil.copy(BUILD / "lib" / "liblocus.so", build / "lib" / f"liblocus-{name}.so")
        entries.append({"name": name, "file": f"build/lib/liblocus-{name}.so",
                        "design": design, "debug": False})
    (build / "variants.json").write_text(json.dumps(entries))
    return Paths(root=tmp_path, build=build)


def test_lf_allocators_are_found_by_design(tmp_path):
    need_built("espresso")
    paths = fake_build(tmp_path, [("pow2", "pow2"), ("lf", "lf"), ("phk", "phk")])
    allocs, _ = session.suite_allocators(paths, None, None, suite.LF_DESIGNS, "the lf suite")
    names = [a.name for a in allocs]
    assert names[:4] == ["glibc", "locus-vam", "locus-lf", "locus-pow2"]
    assert "locus-phk" not in names
    # without them, the suite runs under the others
    paths = fake_build(tmp_path / "none", [])
    allocs, _ = session.suite_allocators(paths, None, None, suite.LF_DESIGNS)
    assert [a.name for a in allocs][:2] == ["glibc", "locus-vam"]


def test_lf_suite_quick_run(tmp_path):
    need_built(*LF)
    out = tmp_path / "lf"
    r = run_locus("compare", "--suite", "lf", "--quick", "-a", "glibc,locus-vam", "-o", out,
                  *(["--build-dir", BUILD_DIR] if BUILD_DIR else []))
    assert r.returncode == 0, r.stderr + r.stdout
    for name in ("report.md", "summary.csv", "summary.json", "runs.jsonl", "runs.csv",
                 "meta.json", "time.png", "memory.png", "frag.png"):
        assert (out / name).stat().st_size > 0, name
    assert json.loads((out / "meta.json").read_text())["suite"] == "lf"
    data = json.loads((out / "summary.json").read_text())
    assert data["allocators"] == ["glibc", "locus-vam"]
    assert data["workloads"] == list(LF)
    for row in data["results"]:
        assert row["status"] == "ok", row
        assert row["peak_live_bytes"] > 0
        assert row["frag_rss"] == pytest.approx(row["maxrss_kib"] * 1024
                                                / row["peak_live_bytes"])
    # shbench's live set alone is about 105 MB: the ratio is near its heap's
    shbench = [row for row in data["results"] if row["workload"] == "shbench"]
    assert all(0.9 < row["frag_rss"] < 3 for row in shbench)
    assert data["geomean"]["glibc"]["frag_rss"] > 0
    for title in ("Fragmentation, seed 002", "Fragmentation", "shbench", "threadtest"):
        assert title in r.stdout
    assert "## Fragmentation, seed 002" in (out / "report.md").read_text()
    r = run_locus("report", out, "--no-plots")     # re-drawn from the raw data
    assert r.returncode == 0, r.stderr
    assert "Fragmentation, seed 002" in r.stdout


# ---- seed 002's fragmentation ratio on synthetic runs ---------------------------------------

def synthetic():
    meta = {"baseline": "glibc", "repetitions": 3, "machine": {"cores": 2},
            "allocators": [{"name": a, "kind": "peer", "library": None}
                           for a in ("glibc", "pow2")],
            "workloads": [{"name": w, "argv": ["/bin/true"], "kind": "bench"}
                          for w in ("shbench", "larson")]}
    runs = [{"kind": "live", "workload": "shbench", "allocator": "tracer", "status": "ok",
             "peak_live_bytes": 100 * 1024 * 1024},
            {"kind": "live", "workload": "larson", "allocator": "tracer", "status": "ok",
             "peak_live_bytes": 10 * 1024 * 1024}]
    # (workload, allocator): peak RSS in MiB of three repetitions (median: the middle one),
    # peak anonymous memory in MiB
    figures = {("shbench", "glibc"): ((118, 110, 130), 108),
               ("shbench", "pow2"): ((165, 160, 170), 158),
               ("larson", "glibc"): ((20, 20, 20), 18),
               ("larson", "pow2"): ((40, 45, 50), 44)}
    for (w, a), (rss, anon) in figures.items():
        runs += [{"kind": "time", "workload": w, "allocator": a, "rep": i, "status": "ok",
                  "wall_s": 1.0, "maxrss_kib": m * 1024, "peak_anon_kib": anon * 1024}
                 for i, m in enumerate(rss)]
    return meta, runs


def test_seed_002_ratio_is_peak_rss_over_peak_live_bytes(tmp_path):
    meta, runs = synthetic()
    s = results.summarise(meta, runs)
    cells = s["cells"]
    assert cells[("shbench", "glibc")]["frag_rss"] == pytest.approx(118 / 100)
    assert cells[("shbench", "pow2")]["frag_rss"] == pytest.approx(165 / 100)
    assert cells[("larson", "pow2")]["frag_rss"] == pytest.approx(45 / 10)
    # beside it, unchanged, seed 000's: peak anonymous memory over the same denominator
    assert cells[("shbench", "pow2")]["frag"] == pytest.approx(158 / 100)
    assert s["geomean"]["pow2"]["frag_rss"] == pytest.approx((1.65 * 4.5) ** 0.5)
    assert s["geomean"]["glibc"]["frag_rss"] == pytest.approx((1.18 * 2.0) ** 0.5)

    out = io.StringIO()
    report.print_summary(Console(file=out, width=160), s, meta)
    report.write_all(tmp_path, s, meta, results.rows(s), runs, plots=False)
    text = out.getvalue()
    assert "Fragmentation, seed 002" in text
    assert "1.65" in text and "4.50" in text and "1.18" in text
    with open(tmp_path / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    assert {"frag", "frag_rss", "peak_live_bytes"} <= set(rows[0])
    by = {(r["workload"], r["allocator"]): r for r in rows}
    assert float(by[("larson", "glibc")]["frag_rss"]) == pytest.approx(2.0)
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["geomean"]["pow2"]["frag_rss"] == pytest.approx((1.65 * 4.5) ** 0.5)
    md = (tmp_path / "report.md").read_text()
    assert "## Fragmentation, seed 002" in md and "| shbench | 1.18 | 1.65 |" in md


def test_no_seed_002_ratio_without_a_trace():
    meta, runs = synthetic()
    s = results.summarise(meta, [r for r in runs if r["kind"] != "live"])
    assert all(c["frag_rss"] is None for c in s["cells"].values())
    assert "Fragmentation, seed 002" not in [t[0] for t in report.tables(s)]
