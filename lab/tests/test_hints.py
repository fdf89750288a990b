"""The hints suite (seed 001): the program bench/hints.cpp in both modes, and
`locus compare --suite hints` planning, summarising and reporting."""
import pytest

from locus_lab import hints, stats
from locus_lab.allocators import Allocator

from conftest import BUILD_ARGS, LOCUS, bench_program, compare_suite, needs_locus, run_locus

needs_program, run_program = bench_program("hints")


@needs_program
@pytest.mark.parametrize("workload", list(hints.WORKLOADS))
def test_both_modes_print_the_same_checksum(workload):
    out = {}
    for mode in ("--hints", "--no-hints"):
        r = run_program(workload, mode, "--quick")
        assert r.returncode == 0, r.stderr
        out[mode] = hints.parse_output(r.stdout)
        assert 0 <= out[mode]["page_accuracy"] <= 1 and out[mode]["hinted"] > 0
        assert out[mode]["peak_live_bytes"] > 0 and "lib_variant" not in out[mode]
    if LOCUS.exists():
        r = run_program(workload, "--hints", "--quick", preload=LOCUS)
        out["locus"] = hints.parse_output(r.stdout)
        assert out["locus"]["lib_variant"] == "vam"
        assert out["locus"]["lib_hint_calls"] >= out["locus"]["hinted"]
    assert len({o["checksum"] for o in out.values()}) == 1, out


@needs_program
@pytest.mark.parametrize("args", [[], ["nosuch"], ["list", "--scale", "0"], ["list", "--bad"],
                                  ["list", "--passes", "1.5"], ["list", "--scale"]])
def test_program_usage_errors_exit_2(args):
    r = run_program(*args)
    assert r.returncode == 2 and r.stdout == "" and "usage" in r.stderr


def test_plan_and_summary():
    allocs = [Allocator("glibc", "system", None), Allocator("locus-vam", "locus", "/x/l.so")]
    configs = hints.plan(allocs, ["list"])
    assert [(c.mode, c.allocator) for c in configs] == [
        ("no-hints", "glibc"), ("hints", "glibc"), ("no-hints", "locus-vam"),
        ("hints", "locus-vam")]
    meta = {"configs": [{"workload": c.workload, "mode": c.mode, "allocator": c.allocator}
                        for c in configs], "baseline": "glibc"}
    runs = []
    for c in configs:
        fast = 0.5 if c.allocator == "locus-vam" else 1.0
        for rep in range(3):
            runs.append({"kind": "hint", "workload": "list", "mode": c.mode,
                         "allocator": c.allocator, "rep": rep, "status": "ok",
                         "build_s": 0.1, "traverse_s": fast * (1 + rep / 10), "wall_s": 1,
                         "maxrss_kib": 2048, "page_accuracy": 0.9, "line_accuracy": 0.2,
                         "peak_live_bytes": 1 << 20, "hinted": 10, "checksum": "ab"})
        runs.append({"kind": "hint-cache", "workload": "list", "mode": c.mode,
                     "allocator": c.allocator, "status": "ok", "instructions": 100,
                     "l1d_misses": 10, "lld_misses": 4 if fast < 1 else 8})
    for r in runs[4:7]:   # glibc with hints printed another checksum: the majority wins
        r["checksum"] = "cd"
    s = hints.summarise(meta, runs)
    vam = s["cells"][("list", "hints", "locus-vam")]
    assert vam["traverse_vs_base"] == pytest.approx(0.5)
    assert vam["lld_vs_base"] == pytest.approx(0.5) and vam["rss_over_live"] == pytest.approx(2)
    assert s["cells"][("list", "hints", "glibc")]["status"] == stats.WRONG_CHECKSUM
    acc = hints.accuracy_rows(s)
    assert [(r["allocator"], r["page_hints"]) for r in acc] == [("glibc", 0.9),
                                                                ("locus-vam", 0.9)]


@needs_program
@needs_locus
def test_compare_suite_hints_end_to_end(tmp_path):
    r, out, data = compare_suite("hints", tmp_path, "-a", "glibc,locus",
                                 files=("accuracy.csv", "hints_time.png", "hints_accuracy.png"))
    assert data["baseline"] == "glibc"
    got = {(row["workload"], row["mode"], row["allocator"]): row for row in data["results"]}
    assert len(got) == len(hints.WORKLOADS) * 2 * 2
    for row in data["results"]:
        assert row["status"] == "ok", row
        assert row["traverse_s"] > 0 and row["maxrss_kib"] > 0 and row["rss_over_live"] > 0
    base = got[("list", "no-hints", "glibc")]
    assert base["time_vs_base"] == pytest.approx(1.0)
    vam = got[("list", "hints", "locus-vam")]
    assert vam["lib_page_accuracy"] > 0.8
    if (out / "runs.jsonl").read_text().count('"hint-cache"'):
        assert vam["instructions"] > 0 and vam["lld_misses"] is not None
    assert "Page and cache-line accuracy" in r.stdout
    (out / "report.md").unlink()
    r = run_locus("report", out)
    assert r.returncode == 0, r.stderr
    assert (out / "report.md").exists() and "## Accuracy" in (out / "report.md").read_text()


@pytest.mark.parametrize("args,message", [
    (["--suite", "hints", "-w", "nosuch"], "unknown or unavailable hint workload"),
    (["--suite", "hints", "--", "true"], "no command"),
    (["--suite", "hints", "-a", "nosuch"], "unknown allocator"),
])
def test_compare_suite_hints_bad_input(args, message):
    r = run_locus("compare", "--quick", *args, *BUILD_ARGS)
    assert r.returncode == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1
