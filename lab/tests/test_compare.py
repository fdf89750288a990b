"""`locus compare` and `locus report` end to end."""
import csv
import json
import os
import subprocess
from pathlib import Path

import pytest

from locus_lab import allocators
from locus_lab.suite import is_static_elf

from conftest import run_locus

# Another build folder can be tested with LOCUS_TEST_BUILD_DIR=/path/to/build.
BUILD_DIR = os.environ.get("LOCUS_TEST_BUILD_DIR")
BUILD = Path(BUILD_DIR) if BUILD_DIR else Path(__file__).resolve().parents[2] / "build"
BUILD_ARGS = ["--build-dir", BUILD_DIR] if BUILD_DIR else []
OUTPUTS = ("report.md", "summary.csv", "summary.json", "runs.jsonl", "runs.csv", "meta.json",
           "time.png", "memory.png", "frag.png")


def peer():
    for p in allocators.PEERS:
        if allocators.find_library(p.soname):
            return p.name
    pytest.skip("no peer allocator installed")


def load_summary(folder):
    return json.loads((folder / "summary.json").read_text())


def check_sane(folder, allocs, workloads, reps=1):
    for name in OUTPUTS:
        assert (folder / name).stat().st_size > 0, name
    data = load_summary(folder)
    assert data["baseline"] == "glibc"
    assert data["allocators"] == allocs
    assert data["workloads"] == workloads
    for row in data["results"]:
        assert row["status"] == "ok", row
        assert 0 < row["wall_s"] < 120
        assert row["user_s"] >= 0 and row["sys_s"] >= 0
        assert row["maxrss_kib"] > 100 and row["peak_anon_kib"] > 0
        assert row["minflt"] > 0
        assert row["peak_live_bytes"] > 0
        if row["workload"] == "gcc":  # its heap is mostly its own: no fragmentation figure
            assert row["frag"] is None
        else:
            assert 0.5 < row["frag"] < 1000
        if row["allocator"] == "glibc":
            assert row["wall_norm"] == pytest.approx(1.0)
            assert row["maxrss_norm"] == pytest.approx(1.0)
        else:
            assert 0.05 < row["wall_norm"] < 20
    with open(folder / "summary.csv") as f:
        assert len(list(csv.DictReader(f))) == len(allocs) * len(workloads)
    runs = [json.loads(line) for line in (folder / "runs.jsonl").read_text().splitlines()]
    assert sum(r["kind"] == "time" for r in runs) == len(allocs) * len(workloads) * reps
    assert sum(r["kind"] == "live" for r in runs) == len(workloads)
    report = (folder / "report.md").read_text()
    assert "![Run time](time.png)" in report and "Verdict" in report


@pytest.mark.skipif(not (BUILD / "lib" / "liblocus.so").exists(),
                    reason="build/lib/liblocus.so is not built yet")
def test_quick_suite_with_glibc_and_locus(tmp_path):
    # One bench program (its smallest scale takes a second or two) and every real program.
    workloads = (["churn"] if (BUILD / "bench" / "churn").exists() else []) + \
        ["python", "gcc", "perl", "sqlite"]
    out = tmp_path / "results"
    r = run_locus("compare", "--quick", "--allocators", "glibc,locus", "--output", out,
                  "--workloads", ",".join(workloads), *BUILD_ARGS)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    data = load_summary(out)
    locus_name = data["allocators"][1]
    assert locus_name == "locus-vam"
    check_sane(out, ["glibc", locus_name], workloads)
    assert "Run time" in r.stdout and "geomean" in r.stdout


@pytest.mark.skipif(not (BUILD / "bench" / "threads2").exists(),
                    reason="build/bench/threads2 is not built yet")
def test_two_thread_scaling(tmp_path):
    # The cheapest run that yields the scaling and many-thread figures: three quick runs
    # (1/20 of the work), no tracing.
    out = tmp_path / "results"
    r = run_locus("compare", "--quick", "-a", "glibc", "-w", "threads1,threads2,threads8",
                  "--no-frag", "--no-plots", "-o", out, *BUILD_ARGS)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Two-thread scaling" in r.stdout and "threads1 †" in r.stdout
    assert "Many threads" in r.stdout and "threads8 †" in r.stdout
    data = load_summary(out)
    s = data["scaling"]["glibc"]
    assert s["scaling"] == pytest.approx(2 * s["t1_s"] / s["t2_s"])
    assert 0.2 < s["scaling"] < 3  # 2.0 on two idle cores; less on a busy machine
    assert data["not_in_geomean"] == ["threads1", "threads8"]
    m = data["many_threads"]["glibc"]
    assert m["runs"]["threads8"]["ratio"] == pytest.approx(m["runs"]["threads8"]["t_s"] / s["t2_s"])
    with open(out / "summary.csv") as f:
        rows = {row["workload"]: row for row in csv.DictReader(f)}
    assert float(rows["threads2"]["scaling"]) == pytest.approx(s["scaling"])
    assert rows["threads1"]["in_geomean"] == "False" and rows["threads1"]["scaling"] == ""
    assert "## Two-thread scaling" in (out / "report.md").read_text()
    assert "## Many threads" in (out / "report.md").read_text()


def test_command_with_glibc_and_a_peer(tmp_path, build_prog):
    name = peer()
    exe = build_prog("alloc_loop.c", "-O2")
    out = tmp_path / "results"
    # Long enough (tens of ms) that the lab's 5 ms memory sampler sees the program running
    # under every allocator: 300,000 iterations ended between two samples under jemalloc.
    r = run_locus("compare", "-a", f"glibc,{name}", "-r", "2", "-o", out, "--name", "loop",
                  "--", exe, 3000000)
    assert r.returncode == 0, r.stdout + r.stderr
    check_sane(out, ["glibc", name], ["loop"], reps=2)
    data = load_summary(out)
    rows = {row["allocator"]: row for row in data["results"]}
    assert rows["glibc"]["runs"] == 2 and rows[name]["ok_runs"] == 2
    assert rows["glibc"]["wall_min_s"] <= rows["glibc"]["wall_s"] <= rows["glibc"]["wall_max_s"]
    assert data["verdict"]["fastest"] in ("glibc", name)


def test_a_crash_is_a_result(tmp_path, build_prog):
    name = peer()
    exe = build_prog("crash_under.c", "-O1")
    soname = next(p.soname for p in allocators.PEERS if p.name == name)
    out = tmp_path / "results"
    r = run_locus("compare", "--quick", "-a", f"glibc,{name}", "-o", out, "--", exe,
                  soname.split(".so")[0])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    assert "SIGSEGV" in r.stdout
    rows = {row["allocator"]: row for row in load_summary(out)["results"]}
    assert rows["glibc"]["status"] == "ok"
    assert rows[name]["status"] == "SIGSEGV"
    assert rows[name]["wall_norm"] is None
    assert "SIGSEGV" in (out / "report.md").read_text()


def test_report_redraws_from_saved_runs(tmp_path, build_prog):
    exe = build_prog("alloc_loop.c", "-O2")
    out = tmp_path / "results"
    r = run_locus("compare", "--quick", "-a", "glibc", "-o", out, "--", exe, 2000000)
    assert r.returncode == 0, r.stdout + r.stderr
    for name in ("report.md", "time.png", "memory.png", "frag.png", "summary.csv"):
        (out / name).unlink()
    r = run_locus("report", out)
    assert r.returncode == 0, r.stdout + r.stderr
    for name in ("report.md", "time.png", "memory.png", "frag.png", "summary.csv"):
        assert (out / name).exists(), name
    assert "Run time" in r.stdout


def test_list():
    r = run_locus("list", *BUILD_ARGS)
    assert r.returncode == 0, r.stderr
    assert "glibc" in r.stdout and "Default suite" in r.stdout


def test_static_programs_are_recognised(tmp_path, cc):
    src = tmp_path / "s.c"
    src.write_text("int main(void) { return 0; }\n")
    exe = tmp_path / "s"
    if subprocess.run([cc, "-static", "-o", exe, src], capture_output=True).returncode != 0:
        pytest.skip("no static C library")
    assert is_static_elf(str(exe))
    assert not is_static_elf("/bin/sh")
    assert not is_static_elf(str(src))
