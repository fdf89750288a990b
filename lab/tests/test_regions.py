"""The regions suite (seed 004): the program bench/regions.c in every mode, and
`locus compare --suite regions` planning, summarising and reporting."""
import re

import pytest

from locus_lab import allocators, plots, regions, stats
from locus_lab.allocators import Allocator

from conftest import BUILD_ARGS, LOCUS, bench_program, compare_suite, needs_locus, run_locus

needs_program, run_program = bench_program("regions")


def result_line(r):
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert re.fullmatch(r"regions: \w+ scale=1 .* frees=\d+ clears=\d+ checksum=[0-9a-f]{16}",
                        lines[-1]), lines[-1]
    parsed = regions.parse_output(r.stdout)
    for key in regions.METRICS:
        assert key in parsed, key
    assert parsed["live_peak_kib"] > 0 and parsed["held_live_area"] > 0
    return lines[-1]


def installed_peer_modes():
    return [m for m, (soname, _) in regions.PEER_MODES.items() if allocators.find_library(soname)]


# ---- the program --------------------------------------------------------------------------------

@needs_program
@pytest.mark.parametrize("workload", list(regions.WORKLOADS))
def test_every_mode_prints_the_same_result(workload):
    """The checksum depends on the seeds alone: every region implementation gives the same
    line (bump, emulation, each installed peer's arenas under glibc, Locus regions)."""
    lines = {mode: result_line(run_program(workload, mode, 1, "--quick"))
             for mode in ["bump", "emulate", *installed_peer_modes()]}
    if LOCUS.exists():
        lines["locus"] = result_line(run_program(workload, "locus", 1, "--quick", preload=LOCUS))
        lines["emulate over locus"] = result_line(
            run_program(workload, "emulate", 1, "--quick", preload=LOCUS))
    assert len(set(lines.values())) == 1, lines


@needs_program
def test_nothing_is_freed_in_the_compiler_and_much_in_the_parser():
    compiler = regions.parse_output(run_program("compiler", "bump", 1, "--quick").stdout)
    parser = regions.parse_output(run_program("parser", "bump", 1, "--quick").stdout)
    assert compiler["frees"] == 0
    objects = int(re.search(r"objects=(\d+)", parser["result"]).group(1))
    assert parser["frees"] > objects // 2


@needs_program
def test_locus_mode_without_locus_is_one_line_and_status_2():
    r = run_program("server", "locus", 1, "--quick")
    assert r.returncode == 2
    assert r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and "locus regions unavailable" in r.stderr
    status = regions.run_status({"status": "exit 2", "stderr_tail": r.stderr}, {})
    assert status == regions.UNAVAILABLE


@needs_program
@pytest.mark.parametrize("args", [[], ["compiler"], ["compiler", "nosuch"], ["nosuch", "bump"],
                                  ["compiler", "bump", "0"], ["compiler", "bump", "--bad"],
                                  ["compiler", "bump", "--profile"]])
def test_usage_errors_exit_2(args):
    r = run_program(*args)
    assert r.returncode == 2 and r.stdout == "" and "usage" in r.stderr


@needs_program
def test_profile_has_both_curves(tmp_path):
    csv = tmp_path / "p.csv"
    r = run_program("parser", "emulate", 1, "--quick", "--profile", csv)
    parsed = regions.parse_output(r.stdout)
    rows = plots.read_profile(csv)
    assert csv.read_text().startswith("allocations,live_bytes,held_bytes\n")
    assert len(rows) == parsed["samples"] > 100
    times = [t for t, _, _ in rows]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert max(live for _, live, _ in rows) <= parsed["live_peak_kib"] * 1024 + 1023
    assert any(held > 0 for _, _, held in rows)


# ---- planning, parsing, summarising -------------------------------------------------------------

def fake_allocators():
    return [Allocator("glibc", "system", None), Allocator("locus-vam", "locus", "/x/liblocus.so"),
            Allocator("locus-phk", "locus", "/x/liblocus-phk.so"),
            Allocator("jemalloc", "peer", "/x/libjemalloc.so.2"),
            Allocator("mimalloc", "peer", "/x/libmimalloc.so.2")]


def test_plan_runs_each_mode_under_its_allocators():
    configs = regions.plan(fake_allocators(), ["compiler"], ["apr", "je_arena"])
    got = [(c.mode, c.allocator) for c in configs]
    assert got == [("locus", "locus-vam"), ("locus", "locus-phk"), ("bump", "glibc"),
                   ("apr", "glibc"), ("je_arena", "glibc"), ("emulate", "glibc"),
                   ("emulate", "jemalloc"), ("emulate", "mimalloc"), ("emulate", "locus-vam"),
                   ("emulate", "locus-phk")]
    assert {c.workload for c in configs} == {"compiler"}
    assert len(regions.plan(fake_allocators(), list(regions.WORKLOADS), [])) == 3 * 8


def test_parse_output_reads_metrics_and_result():
    text = ("live_peak_kib=100\nheld_peak_kib=300\nhwm_kib=310\nheld_live_area=2.500\n"
            "samples=10\nsample_every=4096\nother=7\n"
            "regions: parser scale=1 units=3 objects=9 bytes=99 frees=4 clears=3 "
            "checksum=0123456789abcdef\n")
    p = regions.parse_output(text)
    assert p["live_peak_kib"] == 100 and p["held_live_area"] == 2.5 and p["frees"] == 4
    assert p["checksum"] == "0123456789abcdef" and p["result"].startswith("regions: parser")
    assert "other" not in p
    assert regions.run_status({"status": "ok"}, {}) == "no result"
    assert regions.run_status({"status": "exit 2", "stderr_tail": "usage"}, {}) == "exit 2"


def synthetic(cpu, rss, result="regions: compiler scale=1 frees=0 checksum=00000000000000aa",
              status="ok", frees=0):
    return {"kind": "region", "status": status, "user_s": cpu, "sys_s": 0.0, "wall_s": cpu,
            "maxrss_kib": rss, "live_peak_kib": 10, "held_peak_kib": 20, "hwm_kib": 20,
            "held_live_area": 2.0, "samples": 5, "sample_every": 1, "result": result,
            "frees": frees}


def synthetic_folder():
    allocs = fake_allocators()[:1] + fake_allocators()[1:2] + fake_allocators()[3:]
    meta = {"allocators": [a.to_json() for a in allocs], "suite": "regions"}
    configs = regions.plan(allocs, ["compiler"], ["apr"])
    meta["configs"] = [{"workload": c.workload, "mode": c.mode, "allocator": c.allocator}
                       for c in configs]
    figures = {("locus", "locus-vam"): (1.0, 1000), ("bump", "glibc"): (0.8, 800),
               ("apr", "glibc"): (0.9, 900), ("emulate", "glibc"): (2.0, 1100),
               ("emulate", "jemalloc"): (1.6, 1500), ("emulate", "mimalloc"): (1.25, 1300),
               ("emulate", "locus-vam"): (1.5, 1250)}
    runs = []
    for c in configs:
        cpu, rss = figures[(c.mode, c.allocator)]
        for rep, k in enumerate((1.0, 1.1, 0.9)):
            runs.append({**synthetic(cpu * k, rss), "workload": c.workload, "mode": c.mode,
                         "allocator": c.allocator, "rep": rep})
    return meta, runs


def test_summary_ratios_and_checks():
    meta, runs = synthetic_folder()
    s = regions.summarise(meta, runs)
    assert s["flagship"] == "locus-vam"
    cell = s["cells"][("compiler", "locus", "locus-vam")]
    assert cell["status"] == "ok" and cell["cpu_s"] == pytest.approx(1.0)
    assert cell["cpu_vs_bump"] == pytest.approx(1.25)
    assert cell["maxrss_vs_bump"] == pytest.approx(1.25)
    got = {(c["check"], c["against"]): c["ratio"] for c in s["checks"]}
    assert got[("time vs bump", "bump / glibc")] == pytest.approx(1.25)
    assert got[("time vs peer arena", "apr / glibc")] == pytest.approx(1 / 0.9)
    # the fastest peer under emulation is mimalloc (glibc and Locus are not peers)
    assert got[("time vs emulation", "emulate / mimalloc")] == pytest.approx(0.8)
    assert got[("peak RSS", "emulate / locus-vam")] == pytest.approx(0.8)
    assert got[("peak RSS", "apr / glibc")] == pytest.approx(1000 / 900)
    assert got[("peak RSS", "bump / glibc")] == pytest.approx(1.25)
    assert len(regions.check_lines(s)) == len(s["checks"]) == 6


def test_summary_flags_a_wrong_checksum_and_failures():
    meta, runs = synthetic_folder()
    for r in runs:
        if r["mode"] == "emulate" and r["allocator"] == "jemalloc":
            r["result"] = r["result"].replace("aa", "bb")
        if r["mode"] == "apr":
            r.update(status="exit 1", stderr_tail="regions: error: content mismatch")
    s = regions.summarise(meta, runs)
    assert s["cells"][("compiler", "emulate", "jemalloc")]["status"] == stats.WRONG_CHECKSUM
    assert s["cells"][("compiler", "apr", "glibc")]["status"] == "exit 1"
    assert s["cells"][("compiler", "emulate", "mimalloc")]["status"] == "ok"
    assert not any("apr" in c["against"] for c in s["checks"])


def test_no_time_check_against_bump_where_objects_are_freed():
    meta, runs = synthetic_folder()
    for r in runs:
        r["frees"] = 5
    s = regions.summarise(meta, runs)
    assert not any(c["check"] == "time vs bump" for c in s["checks"])


# ---- locus compare --suite regions ----------------------------------------------------------------

@needs_program
@needs_locus
def test_compare_suite_regions_end_to_end(tmp_path):
    r, out, data = compare_suite("regions", tmp_path, "-w", "compiler", files=(
        "regions_time.png", "regions_memory.png", "regions_profile.png"))
    assert data["flagship"] == "locus-vam"
    got = {(row["mode"], row["allocator"]): row for row in data["results"]}
    assert ("locus", "locus-vam") in got and ("bump", "glibc") in got
    assert ("emulate", "glibc") in got and ("emulate", "locus-vam") in got
    for mode in installed_peer_modes():
        assert (mode, "glibc") in got
    for row in data["results"]:
        assert row["status"] == "ok", row
        assert row["cpu_s"] > 0 and row["maxrss_kib"] > 100 and row["held_live_area"] > 0
    assert got[("bump", "glibc")]["cpu_vs_bump"] == pytest.approx(1.0)
    kinds = {c["check"] for c in data["checks"]}
    assert {"time vs bump", "peak RSS"} <= kinds
    assert len(list((out / "profiles").glob("compiler-*.csv"))) == len(data["results"])
    report = (out / "report.md").read_text()
    assert "## Checks" in report and "![Time](regions_time.png)" in report
    assert "Locus regions / pure bump" in r.stdout

    (out / "report.md").unlink()
    r = run_locus("report", out)
    assert r.returncode == 0, r.stderr
    assert (out / "report.md").exists() and "Regions (seed 004)" in r.stdout


@pytest.mark.parametrize("args,message", [
    (["--suite", "regions", "--cache"], "--cache"),
    (["--suite", "regions", "-w", "nosuch"], "unknown or unavailable region workload"),
    (["--suite", "regions", "--", "true"], "no command"),
    (["--suite", "nosuch"], "invalid choice"),
])
def test_compare_suite_regions_bad_input(args, message):
    r = run_locus("compare", "--quick", *args, *BUILD_ARGS)
    assert r.returncode == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1
