"""The C tracer on programs whose calls are known exactly."""
import json
import os
import subprocess

import pytest

from locus_lab import allocators, trace
from locus_lab.common import find_paths

from conftest import run_locus

OP = trace.OP


def traced_run(tracer, exe, args=(), out=None, summary=False, extra_preload=None, cwd=None):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env["LD_PRELOAD"] = str(tracer) + (f" {extra_preload}" if extra_preload else "")
    env["LOCUS_TRACE_FILE"] = str(out)
    env["LOCUS_TRACE_MODE"] = "summary" if summary else "events"
    trace.clear_trace_files(out)
    return subprocess.run([str(exe), *map(str, args)], env=env, capture_output=True, text=True,
                          check=True, cwd=cwd)


def printed_addresses(stdout):
    return {name: int(addr, 16) for name, addr in (line.split() for line in stdout.splitlines()
                                                   if len(line.split()) == 2)}


def events(path):
    recs = trace.read_trace(path).records
    recs = recs[recs["op"] != OP["thread start"]]
    recs = recs[recs["seq"].argsort(kind="stable")]
    return [(trace.OPS[int(r["op"])], int(r["addr"]), int(r["size"]), int(r["aux"]))
            for r in recs], recs


def test_every_malloc_family_call_is_recorded_once(tmp_path, tracer, build_prog):
    exe = build_prog("known_calls.c", "-O1")
    out = tmp_path / "k.trace"
    proc = traced_run(tracer, exe, out=out)
    a = printed_addresses(proc.stdout)
    got, recs = events(out)
    expected = [
        ("malloc", a["malloc"], 24, 0),
        ("calloc", a["calloc"], 120, 0),
        ("realloc", a["realloc_null"], 100, 0),
        ("realloc (release)", a["realloc_null"], 0, 0),
        ("realloc", a["realloc_grow"], 5000, 0),
        ("posix_memalign", a["posix_memalign"], 200, 6),
        ("aligned_alloc", a["aligned_alloc"], 256, 7),
        ("memalign", a["memalign"], 48, 5),
        ("valloc", a["valloc"], 10, 12),
        ("pvalloc", a["pvalloc"], 10, 12),
        ("reallocarray", a["reallocarray"], 63, 0),
        ("malloc", 0, trace.SIZE_SATURATED, 0),          # failed: address 0, size saturated
        ("free", a["malloc"], 0, 0),
        ("free", a["calloc"], 0, 0),
        ("free", a["realloc_grow"], 0, 0),
        ("free", a["posix_memalign"], 0, 0),
        ("free", a["aligned_alloc"], 0, 0),
        ("free", a["memalign"], 0, 0),
        ("free", a["valloc"], 0, 0),
        ("free", a["pvalloc"], 0, 0),
        ("realloc (release)", a["reallocarray"], 0, 0),  # realloc(p, 0) frees p
        ("malloc", a["leak"], 1000, 0),
    ]
    assert got == expected
    # Each call in the program is its own call site; the frees of different blocks too.
    sites = recs["site"]
    assert len(set(sites[[0, 1, 2, 5, 6, 7]].tolist())) == 6
    assert sites[12] != sites[13]
    # The statistics agree with the program.
    s = trace.compute_stats(trace.read_trace(out).records)
    assert s["total_objects"] == 11 and s["failed_allocations"] == 1
    assert s["live_objects_at_exit"] == 1 and s["live_bytes_at_exit"] == 1000
    assert s["unmatched_releases"] == 0


def test_summary_mode_agrees_with_the_event_trace(tmp_path, tracer, build_prog):
    exe = build_prog("known_calls.c", "-O1")
    traced_run(tracer, exe, out=tmp_path / "k.trace")
    traced_run(tracer, exe, out=tmp_path / "k.summary", summary=True)
    s = trace.compute_stats(trace.read_trace(tmp_path / "k.trace").records)
    summary = trace.read_summary(tmp_path / "k.summary")
    assert summary["peak_live_bytes"] == s["max_bytes_in_use"] == 5731
    assert summary["peak_live_objects"] == s["max_objects_in_use"]
    assert summary["allocations"] == s["total_objects"]
    assert summary["bytes_allocated"] == s["total_bytes"]
    assert summary["failed_allocations"] == 1


def test_threads_and_fork(tmp_path, tracer, build_prog):
    exe = build_prog("alloc_loop.c", "-O2")
    out = tmp_path / "loop.trace"
    iterations, threads = 20000, 4
    traced_run(tracer, exe, [iterations, threads, 1], out=out)
    files = trace.trace_files(out)
    assert len(files) == 2, "the forked child writes its own file"
    parent = trace.compute_stats(trace.read_trace(files[0]).records)
    child = trace.compute_stats(trace.read_trace(files[1]).records)
    assert parent["threads"] == threads
    # Each thread: one malloc and one free per iteration (the first 256 free NULL, which is
    # not recorded), then 256 frees.
    assert parent["calls"]["malloc"] >= iterations * threads
    assert parent["calls"]["free"] >= iterations * threads
    assert parent["unmatched_releases"] == 0
    assert parent["max_objects_in_use"] >= 256  # at least one ring (threads may not overlap)
    assert child["threads"] == 1
    assert child["calls"]["malloc"] == iterations
    assert child["live_objects_at_exit"] == 0
    # The parent's records before the fork are not repeated in the child's file.
    assert child["total_objects"] < iterations + 50


def test_cxx_operators(tmp_path, tracer, build_prog):
    exe = build_prog("cxx_calls.cc", "-O0")
    out = tmp_path / "cxx.trace"
    proc = traced_run(tracer, exe, out=out)
    a = printed_addresses(proc.stdout)
    assert "bad_alloc" in proc.stdout
    got, recs = events(out)
    ops = [(op, addr) for op, addr, size, aux in got]
    assert ("operator new", a["new"]) in ops
    assert ("operator new[]", a["new[]"]) in ops
    assert ("operator new", a["new_aligned"]) in ops
    assert ("operator delete", a["new"]) in ops
    assert ("operator delete[]", a["new[]"]) in ops
    aligned = [g for g in got if g[0] == "operator new" and g[1] == a["new_aligned"]][0]
    assert aligned[3] == 6  # log2(64)
    # libstdc++'s operator new calls malloc: that inner call must not be recorded too.
    assert not [g for g in got if g[0] == "malloc" and g[1] in a.values()]
    # The throwing new[] is a failed allocation.
    assert ("operator new[]", 0) in ops


def test_under_another_allocator(tmp_path, tracer, build_prog):
    # (known_calls.c is not usable here: jemalloc and tcmalloc lack pvalloc or reallocarray,
    # so glibc's versions hand out blocks the peer then frees, with or without the tracer.)
    lib = next(filter(None, (allocators.find_library(p.soname) for p in allocators.PEERS)), None)
    if not lib:
        pytest.skip("no peer allocator installed")
    exe = build_prog("alloc_loop.c", "-O2")
    traced_run(tracer, exe, [5000, 2], out=tmp_path / "glibc.trace")
    traced_run(tracer, exe, [5000, 2], out=tmp_path / "peer.trace", extra_preload=lib)
    a = trace.compute_stats(trace.read_trace(tmp_path / "glibc.trace").records)
    b = trace.compute_stats(trace.read_trace(tmp_path / "peer.trace").records)
    assert b["threads"] == 2 and b["unmatched_releases"] == 0
    assert b["calls"]["malloc"] >= 10000 and abs(b["calls"]["malloc"] - a["calls"]["malloc"]) < 10


def test_locus_trace_command(tmp_path, build_prog):
    exe = build_prog("known_calls.c", "-O1")
    r = run_locus("trace", "-o", tmp_path / "cli.trace", "--", exe)
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stderr and "objects 11" in r.stderr
    r = run_locus("trace", "stats", tmp_path / "cli.trace", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["total_objects"] == 11 and data["max_bytes_in_use"] == 5731
    r = run_locus("trace", "stats", tmp_path / "cli.trace", "--plot", tmp_path / "p.png")
    assert r.returncode == 0, r.stderr
    assert "Max objects in use" in r.stdout and (tmp_path / "p.png").stat().st_size > 0


def test_default_trace_file_name(tmp_path, build_prog):
    exe = build_prog("known_calls.c", "-O1")
    r = run_locus("trace", "--", exe, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "locus.trace").exists()


def test_tracer_is_built_when_missing(tmp_path, cc, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    lib = trace.tracer_library(find_paths(str(tmp_path)))
    assert lib.exists() and lib.parent == tmp_path / "locus-lab"
