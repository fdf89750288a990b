"""`locus replay` and its C driver on synthetic traces whose answers are worked out by hand:
cross-thread frees, realloc chains across threads, address reuse, records out of file order;
traces that cannot be replayed."""
import json
import os
import subprocess

import pytest

from conftest import BUILD_ARGS, LOCUS, run_locus
from locus_lab import replay, trace

OP = trace.OP
THREAD = OP["thread start"]


def rec(seq, op, addr, size=0, thread=0, aux=0):
    return (seq, addr, size, 1, thread, op, aux)


# Three threads (seq order; live bytes requested after each call):
#   T0 malloc A 100 (100); T1 calloc B 200 (300); T0 realloc A -> A' 1000 (1200);
#   T1 frees A' (T0's: 200); T2 reallocs B in place -> 5000 (5000);
#   T0 posix_memalign C 64, 64-aligned (5064); T1 malloc D 10 at A's old address (5074);
#   T2 reallocs B' -> B'' 50 elsewhere (124); T0 frees B'' (T2's: 74); T2 frees C (T0's: 10);
#   T1 operator new E 16 (26). D and E stay live.
BY_THREAD = {
    0: [rec(0, THREAD, 101, thread=0), rec(1, OP["malloc"], 0x1000, 100, 0),
        rec(4, OP["realloc (release)"], 0x1000, 0, 0), rec(5, OP["realloc"], 0x3000, 1000, 0),
        rec(9, OP["posix_memalign"], 0x4000, 64, 0, aux=6), rec(13, OP["free"], 0x5000, 0, 0)],
    1: [rec(2, THREAD, 102, thread=1), rec(3, OP["calloc"], 0x2000, 200, 1),
        rec(6, OP["free"], 0x3000, 0, 1), rec(10, OP["malloc"], 0x1000, 10, 1),
        rec(15, OP["operator new"], 0x6000, 16, 1)],
    2: [rec(7, OP["realloc (release)"], 0x2000, 0, 2), rec(8, OP["realloc"], 0x2000, 5000, 2),
        rec(11, OP["realloc (release)"], 0x2000, 0, 2), rec(12, OP["realloc"], 0x5000, 50, 2),
        rec(14, OP["free"], 0x4000, 0, 2)],
}
LIVE_AFTER_EACH_CALL = [100, 300, 1200, 200, 5000, 5064, 5074, 124, 74, 10, 26]
ALLOCATIONS_AFTER_EACH_CALL = [1, 2, 3, 3, 4, 5, 6, 7, 7, 7, 8]


@pytest.fixture(scope="module")
def driver(paths):
    return replay.driver(paths)


@pytest.fixture
def synthetic(tmp_path):
    # Each thread's records together, threads out of order: the file is not in seq order.
    path = tmp_path / "xthreads.trace"
    trace.write_trace(path, BY_THREAD[1] + BY_THREAD[2] + BY_THREAD[0])
    return path


def run_driver(driver, *args, preload=None):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = str(preload)
    return subprocess.run([str(driver), *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=60)


def read_csv(path):
    lines = path.read_text().splitlines()
    assert lines[0] == "allocations,live_bytes,held_bytes"
    return [tuple(int(x) for x in line.split(",")) for line in lines[1:]]


def test_the_driver_agrees_with_the_trace_statistics(driver, synthetic):
    stats = trace.compute_stats(trace.read_trace(synthetic).records)
    r = run_driver(driver, "--check", synthetic)
    assert r.returncode == 0, r.stderr
    out = replay.parse_output(r.stdout)
    assert out["ops"] == 11 and out["objects"] == 8 and out["threads"] == 3
    assert out["peak_live_bytes"] == stats["max_bytes_in_use"] == 5074
    assert out["live_bytes_at_exit"] == stats["live_bytes_at_exit"] == 26
    assert out["live_objects_at_exit"] == stats["live_objects_at_exit"] == 2
    assert "replay_s" not in out  # --check replays nothing


@pytest.mark.parametrize("preload", [None, "locus"])
def test_ordered_replay_has_the_traces_live_profile(driver, synthetic, tmp_path, preload):
    if preload == "locus" and not LOCUS.exists():
        pytest.skip("liblocus.so not built")
    profile = tmp_path / "p.csv"
    r = run_driver(driver, "--ordered", "--every", "1", "--profile", profile, synthetic,
                   preload=LOCUS if preload else None)
    assert r.returncode == 0, r.stderr
    rows = read_csv(profile)
    # a sample before the first call, one after each call, one at the end
    assert [row[1] for row in rows] == [0] + LIVE_AFTER_EACH_CALL + [26]
    assert [row[0] for row in rows] == [0] + ALLOCATIONS_AFTER_EACH_CALL + [8]
    assert all(row[2] >= 0 for row in rows)


def test_threaded_replay_ends_with_the_traces_live_heap(driver, synthetic, tmp_path):
    # Without --ordered the threads run freely; the cross-thread frees still wait for their
    # objects, and the heap at the end is the trace's.
    for _ in range(20):
        profile = tmp_path / "p.csv"
        r = run_driver(driver, "--every", "1", "--profile", profile, synthetic)
        assert r.returncode == 0, r.stderr
        out = replay.parse_output(r.stdout)
        assert out["ops"] == 11 and out["replay_s"] >= 0
        assert read_csv(profile)[-1][:2] == (8, 26)


def one_line_error(r, *needles):
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_release_of_an_unknown_block_names_the_record(driver, tmp_path):
    path = tmp_path / "bad.trace"
    trace.write_trace(path, [rec(0, OP["malloc"], 0x1000, 8), rec(1, OP["free"], 0x1000),
                             rec(2, OP["free"], 0x1000), rec(3, OP["free"], 0x9000)])
    one_line_error(run_driver(driver, path), "record 2 (free, thread 0)", "0x1000",
                   "never allocated or already released", "--lenient")
    r = run_driver(driver, "--lenient", path)
    assert r.returncode == 0, r.stderr
    assert replay.parse_output(r.stdout)["unknown_releases_skipped"] == 2


def test_allocation_of_a_live_block_names_both_records(driver, tmp_path):
    path = tmp_path / "lost.trace"
    trace.write_trace(path, [rec(0, OP["malloc"], 0x1000, 8), rec(1, OP["malloc"], 0x1000, 8)])
    one_line_error(run_driver(driver, path), "record 1 (malloc", "allocated at record 0")


@pytest.mark.parametrize("content, needle", [
    (b"", "too short"), (b"NOTATRACE" + bytes(100), "bad magic"),
    (b"locus-trace-summary 1\n" + bytes(80), "bad magic")])
def test_files_that_are_not_traces(driver, tmp_path, content, needle):
    path = tmp_path / "x.trace"
    path.write_bytes(content)
    one_line_error(run_driver(driver, path), needle)


def test_failed_allocations_and_unknown_ops_are_skipped(driver, tmp_path):
    path = tmp_path / "t.trace"
    trace.write_trace(path, [rec(0, OP["malloc"], 0, 1 << 30), rec(1, 99, 0x1234),
                             rec(2, OP["malloc"], 0x1000, 8), rec(3, OP["realloc (release)"], 0x1000),
                             rec(4, OP["malloc"], 0x2000, 4)])
    r = run_driver(driver, path)
    assert r.returncode == 0, r.stderr
    out = replay.parse_output(r.stdout)
    # the realloc release with no new block is realloc(p, 0): replayed as a free
    assert out["failed_skipped"] == 1 and out["ops"] == 3 and out["live_bytes_at_exit"] == 4


def test_locus_replay_command(synthetic, tmp_path):
    allocs = "glibc,locus" if LOCUS.exists() else "glibc"
    r = run_locus("replay", synthetic, "-a", allocs, "-r", "2", "-o", tmp_path / "out",
                  *BUILD_ARGS)
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads((tmp_path / "out" / "summary.json").read_text())
    rows = {row["allocator"]: row for row in data["results"]}
    assert set(rows) == set(allocs.replace("locus", "locus-vam").split(","))
    for row in rows.values():
        assert row["status"] == "ok" and row["runs"] == 2
        assert row["peak_live_bytes"] == 5074 and row["frag_rss"] > 0
    assert (tmp_path / "out" / "heap_profile.png").exists()
    assert "## Replay" in (tmp_path / "out" / "report.md").read_text()
    (tmp_path / "out" / "heap_profile.png").unlink()
    r = run_locus("report", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "heap_profile.png").exists()


def test_locus_replay_refuses_a_bad_trace_in_one_line(tmp_path):
    path = tmp_path / "bad.trace"
    trace.write_trace(path, [rec(0, OP["free"], 0x1000)])
    r = run_locus("replay", path, "-a", "glibc", "-o", tmp_path / "out", *BUILD_ARGS)
    assert r.returncode == 2
    assert r.stderr.strip().startswith("locus: error:") and "record 0" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = run_locus("replay", tmp_path / "missing.trace", *BUILD_ARGS)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
