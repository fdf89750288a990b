"""Trace statistics on synthetic traces whose answers are known by hand."""
import numpy as np
import pytest

from locus_lab import trace
from locus_lab.common import LabError

OP = trace.OP
MALLOC, FREE = OP["malloc"], OP["free"]
REALLOC, REALLOC_FREE = OP["realloc"], OP["realloc (release)"]
THREAD = OP["thread start"]


def rec(seq, op, addr, size=0, site=1, thread=0, aux=0):
    return (seq, addr, size, site, thread, op, aux)


def stats_of(tmp_path, records, **kw):
    path = tmp_path / "t.trace"
    trace.write_trace(path, records)
    return trace.compute_stats(trace.read_trace(path).records, **kw)


def test_table3_quantities(tmp_path):
    # A(100) and B(50) live together, then A dies, C(30) is born, B and C die.
    s = stats_of(tmp_path, [
        rec(0, MALLOC, 0xA000, 100), rec(1, MALLOC, 0xB000, 50), rec(2, FREE, 0xA000),
        rec(3, MALLOC, 0xC000, 30), rec(4, FREE, 0xB000), rec(5, FREE, 0xC000),
    ])
    assert s["total_objects"] == 3
    assert s["total_bytes"] == 180
    assert s["average_size"] == pytest.approx(60.0)
    assert s["max_bytes_in_use"] == 150
    assert s["max_objects_in_use"] == 2
    assert s["total_over_max"] == pytest.approx(1.2)
    assert s["live_bytes_at_exit"] == 0 and s["live_objects_at_exit"] == 0
    assert s["releases"] == 3 and s["unmatched_releases"] == 0
    assert s["calls"] == {"malloc": 3, "free": 3}


def test_lifetimes_in_allocation_clock(tmp_path):
    # Lifetime = allocations made between an object's birth and its release:
    # A born at clock 1, freed when clock is 2 -> 1; B born 2, freed at 3 -> 1;
    # C born 3, freed at 3 -> 0; D never freed.
    s = stats_of(tmp_path, [
        rec(0, MALLOC, 0xA000, 8), rec(1, MALLOC, 0xB000, 8), rec(2, FREE, 0xA000),
        rec(3, MALLOC, 0xC000, 8), rec(4, FREE, 0xB000), rec(5, FREE, 0xC000),
        rec(6, MALLOC, 0xD000, 8),
    ])
    assert s["lifetime"]["median"] == 1
    assert s["lifetime"]["mean"] == pytest.approx(2 / 3)
    assert s["lifetime"]["never_freed"] == 1
    hist = {r["bucket"]: r["objects"] for r in s["lifetime_histogram"]}
    assert hist["0"] == 1 and hist["1"] == 2 and hist["never freed"] == 1


def test_realloc_ends_one_object_and_starts_another(tmp_path):
    s = stats_of(tmp_path, [
        rec(0, MALLOC, 0xA000, 10),
        rec(1, REALLOC_FREE, 0xA000), rec(2, REALLOC, 0xA000, 20),   # grown in place
        rec(3, REALLOC_FREE, 0xA000), rec(4, REALLOC, 0xB000, 40),   # moved
        rec(5, FREE, 0xB000),
    ])
    assert s["total_objects"] == 3
    assert s["total_bytes"] == 70
    assert s["max_bytes_in_use"] == 40
    assert s["max_objects_in_use"] == 1
    assert s["live_bytes_at_exit"] == 0
    assert s["calls"]["realloc"] == 2


def test_events_are_ordered_by_clock_not_file_order(tmp_path):
    # Thread 1's buffer was written before thread 0's; X is freed by thread 0 and then
    # handed out again to thread 1. File order would pair the wrong events.
    s = stats_of(tmp_path, [
        rec(3, MALLOC, 0x5000, 64, thread=1), rec(5, FREE, 0x5000, thread=1),
        rec(4, THREAD, 1234, thread=1),
        rec(0, MALLOC, 0x5000, 32, thread=0), rec(1, MALLOC, 0x6000, 16, thread=0),
        rec(2, FREE, 0x5000, thread=0), rec(6, FREE, 0x6000, thread=0),
    ])
    assert s["threads"] == 1
    assert s["unmatched_releases"] == 0
    assert s["max_objects_in_use"] == 2
    assert s["max_bytes_in_use"] == 80      # 0x6000 (16) + the second life of 0x5000 (64)
    assert s["live_bytes_at_exit"] == 0


def test_failures_unknown_frees_and_leaks(tmp_path):
    s = stats_of(tmp_path, [
        rec(0, MALLOC, 0, 1 << 62),           # failed: returns NULL
        rec(1, FREE, 0xDEAD0),                # never allocated in this trace
        rec(2, MALLOC, 0xA000, 100),          # never freed
    ])
    assert s["failed_allocations"] == 1
    assert s["unmatched_releases"] == 1
    assert s["total_objects"] == 1
    assert s["live_objects_at_exit"] == 1 and s["live_bytes_at_exit"] == 100
    assert s["max_bytes_in_use"] == 100


def test_size_histogram_buckets(tmp_path):
    sizes = [8, 9, 16, 17, 4096, 1 << 20, (1 << 20) + 1]
    s = stats_of(tmp_path, [rec(i, MALLOC, 0x1000 * (i + 1), n) for i, n in enumerate(sizes)])
    hist = {r["bucket"]: r["objects"] for r in s["size_histogram"]}
    assert hist["<= 8 B"] == 1
    assert hist["<= 16 B"] == 2
    assert hist["<= 32 B"] == 1
    assert hist["<= 4 KiB"] == 1
    assert hist["<= 1 MiB"] == 1
    assert hist["> 1 MiB"] == 1
    assert sum(hist.values()) == len(sizes)


def test_call_sites(tmp_path):
    s = stats_of(tmp_path, [
        rec(0, MALLOC, 0x1000, 10, site=7), rec(1, MALLOC, 0x2000, 30, site=7),
        rec(2, MALLOC, 0x3000, 5, site=9),
    ])
    assert s["call_sites"] == 2
    top = s["top_sites"][0]
    assert top["site"] == f"{7:06x}" and top["objects"] == 2 and top["bytes"] == 40


def test_profile_keeps_the_peak(tmp_path):
    records = []
    seq = 0
    for i in range(5000):  # a sawtooth: 0..99 live objects of 10 bytes
        records.append(rec(seq, MALLOC, 0x10000 + 16 * (i % 100), 10))
        seq += 1
        if i % 100 == 99:
            for j in range(100):
                records.append(rec(seq, FREE, 0x10000 + 16 * j))
                seq += 1
    s = stats_of(tmp_path, records, profile_points=37)
    assert s["max_bytes_in_use"] == 1000
    assert max(s["profile"]["live_bytes"]) == 1000
    assert len(s["profile"]["clock"]) <= 37


def test_empty_trace(tmp_path):
    s = stats_of(tmp_path, [])
    assert s["total_objects"] == 0 and s["max_bytes_in_use"] == 0
    assert s["lifetime"]["median"] is None


def test_reader_rejects_other_files(tmp_path):
    bad = tmp_path / "bad"
    bad.write_bytes(b"hello world" * 10)
    with pytest.raises(LabError, match="not a Locus trace"):
        trace.read_trace(bad)
    future = tmp_path / "future"
    trace.write_trace(future, [])
    raw = bytearray(future.read_bytes())
    raw[8] = 99  # version
    future.write_bytes(bytes(raw))
    with pytest.raises(LabError, match="version 99"):
        trace.read_trace(future)
    with pytest.raises(LabError, match="cannot read"):
        trace.read_trace(tmp_path / "missing")


def test_reader_ignores_a_torn_last_record(tmp_path):
    path = tmp_path / "t.trace"
    trace.write_trace(path, [rec(0, MALLOC, 0x1000, 5), rec(1, FREE, 0x1000)])
    with open(path, "ab") as f:
        f.write(b"\x01\x02\x03")
    t = trace.read_trace(path)
    assert len(t.records) == 2 and t.header["truncated_bytes"] == 3
    assert np.all(t.records["op"] == [MALLOC, FREE])


def test_summary_file(tmp_path):
    path = tmp_path / "s"
    path.write_text("locus-trace-summary 1\npeak_live_bytes 123\nallocations 4\n")
    assert trace.read_summary(path) == {"peak_live_bytes": 123, "allocations": 4}
    path.write_text("something else\n")
    with pytest.raises(LabError):
        trace.read_summary(path)
