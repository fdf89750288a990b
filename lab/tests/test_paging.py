"""locus paging and locus pressure: the page reducer on hand-computed reference strings, drag
on a log with known last uses, a lackey run end to end, and the pressure command's
"not available here" path."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from locus_lab import paging, pressure
from locus_lab.common import find_paths


@pytest.fixture(scope="module")
def reducer():
    return paging.reducer(find_paths())


def reduce(reducer, text, *args):
    r = subprocess.run([str(reducer), *args], input=text, capture_output=True, text=True,
                       check=True)
    return paging.parse_reducer(r.stdout)


def refs(pages, size=4):
    return "".join(f" L {p * 4096 + 8:x},{size}\n" for p in pages)


def test_stack_distance_curve_by_hand(reducer):
    # 1 2 3 1 2 4 1 4: cold 1,2,3,4; distances 3 (1), 3 (2), 3 (1), 2 (4).
    # misses: size 0 and 1 -> 8, size 2 -> 4 cold + 3 -> 7, size >= 3 -> 4.
    log = "==7== header line\nI  04001000,3\n" + refs([1, 2, 3, 1, 2, 4, 1, 4])
    r = reduce(reducer, log)
    assert r["refs"] == 8 and r["pages"] == 4
    assert r["curve"] == [8, 8, 7, 4]


def test_repeats_dropped_and_spanning_access(reducer):
    # 5 5 5 (one reference), then an 8-byte access at the end of page 6 touching 6 and 7,
    # a store and a modify of page 5: the string is 5 6 7 5, page 5 at distance 3.
    log = refs([5, 5, 5]) + f" S {6 * 4096 + 4092:x},8\n M {5 * 4096:x},4\n"
    r = reduce(reducer, log)
    assert r["refs"] == 4 and r["pages"] == 3
    assert r["curve"] == [4, 4, 4, 3]


def test_prefetchability_by_hand(reducer):
    # 1 2 3 1 2 4 1 4 in one page of memory: every reference misses. The first miss of 1
    # buffers its cluster 0..7 but 1; 2 and 3 are then prefetched; 1 misses again (never
    # buffered) and buffers 2 again; 2 and 4 prefetched; 1 misses, buffers 4; 4 prefetched.
    r = reduce(reducer, refs([1, 2, 3, 1, 2, 4, 1, 4]), "--sizes", "1,3")
    assert r["prefetch"] == [{"pages": 1, "misses": 8, "prefetchable": 5},
                             {"pages": 3, "misses": 4, "prefetchable": 3}]


def test_prefetch_buffer_evicts_oldest(reducer):
    # Buffer of 2 pages, clusters of 4: miss 0 buffers 1, 2, then 3 evicts 1 -> {2, 3};
    # miss 1 is not prefetchable and cycles the buffer back to {2, 3}; 2 and 3 prefetched.
    r = reduce(reducer, refs([0, 1, 2, 3]), "--sizes", "1", "--buffer", "2", "--cluster", "4")
    assert r["prefetch"] == [{"pages": 1, "misses": 4, "prefetchable": 2}]


def test_renumbering_keeps_distances(reducer):
    # More references than the reducer's first time index capacity (2^20): a cycle over 3
    # pages has distance 3 everywhere.
    n = (1 << 20) + 5000
    r = reduce(reducer, refs([i % 3 for i in range(n)]))
    assert r["refs"] == n and r["curve"] == [n, n, n, 3]


DRAG_LOG = """\
**9** A 0x1000 100
 L 1010,4
**9** A 0x2000 50
 S 2000,8
**9** B
 L 1000,8
**9** A 0x3000 200
**9** F 0x1000
 S 1008,8
**9** E
 L 2004,4
**9** F 0x2000
**9** E
"""


def test_drag_known_last_uses(reducer):
    r = reduce(reducer, DRAG_LOG, "--drag")
    # object at 0x1000: allocated at 100, last used at 100 (the allocator's reads between B
    # and A/E are not the program's), freed at 350; 0x2000: 150, last use 350, freed 350;
    # 0x3000 never freed nor used.
    assert sorted(r["objects"]) == [[100, 100, 350, 100], [150, 350, 350, 50]]
    assert r["unfreed"] == [[350, 350, 200]]
    d = paging.drag_profile(r["objects"], r["unfreed"])
    assert d["live_area"] == 100 * 250 + 50 * 200
    assert d["needed_area"] == 50 * 200
    assert d["drag"] == pytest.approx(3.5)
    assert d["peak_live"] == 150 and d["peak_needed"] == 50


def test_failed_run_is_a_row():
    meta = {"command": "locus paging -- prog", "program": ["prog"], "sizes_pages": [1, 2]}
    good = {"allocator": "glibc", "refs": 8, "pages": 4, "curve": [8, 8, 7, 4],
            "prefetch": [{"pages": 1, "misses": 8, "prefetchable": 2},
                         {"pages": 2, "misses": 7, "prefetchable": 0}], "slowdown": 300.0}
    bad = {"allocator": "locus-vam", "error": "prog exited with status -6 under lackey: a|b"}
    table = [ln for ln in paging.markdown(meta, [good, bad]) if ln.startswith("| ")]
    assert table[1].startswith("| glibc | 8 | 4 | 8 | 7 | 25% | 0% | 300x |")
    assert table[2].startswith("| locus-vam | failed: prog exited with status -6")
    assert table[2].count("|") == table[0].count("|")


def test_sizes_parse():
    assert paging.parse_sizes("256,1M,8K") == [256, 256, 2]
    with pytest.raises(Exception):
        paging.parse_sizes("lots")


@pytest.mark.skipif(not shutil.which("valgrind"), reason="valgrind not installed")
def test_paging_end_to_end(build_prog, tmp_path):
    prog = build_prog("region_drag.c", "-O1")
    out = tmp_path / "res"
    r = subprocess.run([sys.executable, "-m", "locus_lab", "paging", "-a", "glibc", "--drag",
                        "--sizes", "8,64", "--no-plots", "-o", str(out), "--", str(prog),
                        "4", "500"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    data = json.loads((out / "paging.json").read_text())
    run = data["runs"][0]
    assert run["pages"] > 10 and run["curve"][0] == run["refs"]
    assert run["curve"] == sorted(run["curve"], reverse=True)
    # 2000 objects plus the region array; three in four are last used long before the bulk
    # free, so the program holds clearly more than it needs.
    assert run["drag"]["objects"] >= 2000
    assert run["drag"]["drag"] > 1.5
    assert "| glibc |" in (out / "paging.md").read_text()


def test_pressure_detection(tmp_path):
    (tmp_path / "proc").write_text("0::/user.slice\n")
    assert pressure.method(tmp_path, tmp_path / "proc")[0] is None   # no cgroup.controllers
    (tmp_path / "cgroup.controllers").write_text("cpu io\n")
    assert "memory controller" in pressure.method(tmp_path, tmp_path / "proc")[1]
    mounts = tmp_path / "mounts"
    mounts.write_text("cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n")
    assert pressure.method(None, tmp_path / "proc", mounts)[1].startswith("no cgroup v2")
    unified = tmp_path / "unified"
    unified.mkdir()
    (unified / "cgroup.controllers").write_text("hugetlb\n")
    mounts.write_text(mounts.read_text() + f"cgroup2 {unified} cgroup2 rw,relatime 0 0\n")
    how, reason = pressure.method(None, tmp_path / "proc", mounts)
    assert how is None and str(unified) in reason and "hybrid" in reason
    swaps = tmp_path / "swaps"
    swaps.write_text("Filename Type Size Used Priority\n/swapfile file 1024 0 -2\n")
    assert pressure.swap_bytes(swaps) == 1 << 20
    swaps.write_text("Filename Type Size Used Priority\n")
    assert pressure.swap_bytes(swaps) == 0


@pytest.mark.skipif(pressure.method()[0] is not None, reason="this machine can limit memory")
def test_pressure_not_available_is_one_line():
    r = subprocess.run([sys.executable, "-m", "locus_lab", "pressure", "--", "true"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1 and "locus paging" in lines[0] and "not on this machine" in lines[0]
