"""`locus trace` on a process tree: a shell wrapper that allocates nothing itself starts the
programs, so the main trace is empty and the children's files hold everything."""
import json
import re

import pytest

from conftest import run_locus
from locus_lab import trace
from locus_lab.common import LabError

ITERATIONS = 3000   # alloc_loop: one malloc per iteration, plus its stdout buffer


@pytest.fixture
def tree(tmp_path, build_prog):
    known = build_prog("known_calls.c", "-O1")
    loop = build_prog("alloc_loop.c", "-O1")
    out = tmp_path / "tree.trace"
    script = f"{known} >/dev/null; {loop} {ITERATIONS} >/dev/null; {known} >/dev/null; exit 0"
    r = run_locus("trace", "-o", out, "--", "sh", "-c", script)
    assert r.returncode == 0, r.stderr
    return out, r.stderr


def test_locus_trace_lists_the_processes_busiest_first(tree):
    out, stderr = tree
    rows = trace.process_table(out)
    assert len(rows) == 4
    assert rows[0]["comm"].startswith("alloc_loop") and rows[0]["records"] > 2 * ITERATIONS
    assert rows[0]["records"] == max(r["records"] for r in rows)
    assert rows[-1]["file"] == str(out) and rows[-1]["records"] == 0   # the shell
    assert "4 processes traced, busiest first" in stderr
    lines = [ln for ln in stderr.splitlines() if re.match(r"\W*\d+ .*\d", ln)]
    assert str(rows[0]["pid"]) in lines[0]   # the busiest is the first row
    assert f"objects {ITERATIONS + 1:,}" in stderr and "objects 0" not in stderr


def test_trace_stats_on_the_base_name_shows_the_busiest(tree):
    out, _ = tree
    r = run_locus("trace", "stats", out, "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["total_objects"] == ITERATIONS + 1
    assert len(data["processes"]) == 4
    r = run_locus("trace", "stats", out)
    assert r.returncode == 0, r.stderr
    assert "4 processes traced" in r.stdout and "showing process" in r.stdout


def test_trace_stats_picks_a_process(tree):
    out, _ = tree
    small = [r for r in trace.process_table(out) if r["records"] and r["records"] < 100][0]
    r = run_locus("trace", "stats", out, "--pid", small["pid"], "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["total_objects"] == 11   # known_calls' objects
    r = run_locus("trace", "stats", out, "--pid", "1")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "no trace of process 1" in r.stderr


def test_process_trace_picks_the_busiest_or_the_pid(tmp_path):
    out = tmp_path / "t.trace"
    trace.write_trace(out, [(0, 0x1000, 8, 1, 0, 1, 0)] * 5, pid=10)
    trace.write_trace(tmp_path / "t.trace.11", [(0, 0x1000, 8, 1, 0, 1, 0)] * 5, pid=11)
    assert trace.process_trace(out) == str(out)        # a tie: the main file
    assert trace.process_trace(out, 11) == str(tmp_path / "t.trace.11")
    assert trace.process_trace(out, 10) == str(out)
    with pytest.raises(LabError):
        trace.process_trace(out, 12)
    out.write_bytes(out.read_bytes()[:80 + 24])        # the child is now the busiest
    assert trace.process_trace(out) == str(tmp_path / "t.trace.11")
    assert trace.process_trace(tmp_path / "t.trace.11") == str(tmp_path / "t.trace.11")


def test_replay_of_the_base_name_replays_the_busiest(tree, tmp_path):
    out, _ = tree
    r = run_locus("replay", out, "-a", "glibc", "-r", "1", "-o", tmp_path / "res", "--no-plots")
    assert r.returncode == 0, r.stderr
    assert "the busiest process" in r.stdout
    data = json.loads((tmp_path / "res" / "summary.json").read_text())
    assert data["results"][0]["status"] == "ok"
