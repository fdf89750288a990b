"""The bench programs in the default suite: the workloads are there with the right
arguments, and each new program's quick mode prints the same checksum under glibc and under
liblocus.so (the checksum depends on the seeds alone)."""
import os
import re
import subprocess
from pathlib import Path

import pytest

from locus_lab import suite
from locus_lab.common import Paths

BUILD_DIR = os.environ.get("LOCUS_TEST_BUILD_DIR")
BUILD = Path(BUILD_DIR) if BUILD_DIR else Path(__file__).resolve().parents[2] / "build"
LOCUS = BUILD / "lib" / "liblocus.so"

NEW = ("xthreads", "xserver", "bigbuf", "batches")
# (program, arguments after the scale) run in quick mode under both allocators
QUICK_RUNS = [("xthreads", []), ("xthreads", ["3", "--no-large"]), ("xserver", []),
              ("bigbuf", []), ("batches", []), ("threads2", ["8", "--split"]),
              ("threads2", ["16", "--split"]),
              # the lf suite's programs (--suite lf)
              ("shbench", []), ("espresso", []), ("larson", []), ("larson", ["3"]),
              ("threadtest", []), ("threadtest", ["3"]), ("sites", []), ("twophase", []),
              # the server workloads
              ("turnover", []), ("turnover", ["3"]), ("xlarge", []), ("xlarge", ["3"]),
              ("prodcons", []), ("prodcons", ["3"]), ("localarrays", []), ("localarrays", ["3"]),
              ("randsmall", []), ("randsmall", ["2"])]


def test_new_workloads_are_in_the_default_suite():
    by_name = {b.name: b for b in suite.BENCH}
    for name in NEW:
        assert name in by_name and by_name[name].in_geomean and by_name[name].quick
    # prodcons with more threads than a 2-core machine's cores measures where the scheduler
    # puts them, not the allocator (docs/results.md): the suite runs one pair.
    assert by_name["prodcons"].extra == ["1"]
    for name, n in suite.MANY_THREADS.items():
        b = by_name[name]
        assert (b.program, b.extra, b.in_geomean) == ("threads2", [str(n), "--split"], False)
    assert set(suite.MANY_THREADS) == {"threads8", "threads16"}


def test_quick_passes_quick_only_to_programs_that_take_it(tmp_path):
    paths = Paths(root=tmp_path, build=tmp_path)
    paths.bench.mkdir()
    for b in suite.BENCH:
        (paths.bench / (b.program or b.name)).write_text("#!/bin/sh\n")
    full = {w.name: w for w in suite.bench_programs(paths, quick=False)[0]}
    quick = {w.name: w for w in suite.bench_programs(paths, quick=True)[0]}
    assert set(full) == {b.name for b in suite.BENCH}
    for b in suite.BENCH:
        assert "--quick" not in full[b.name].argv
        assert ("--quick" in quick[b.name].argv) == b.quick
        assert full[b.name].argv[1] == "1"
    assert quick["threads16"].argv[1:] == ["1", "16", "--split", "--quick"]
    assert not quick["threads16"].in_geomean


def checksum(exe, args, preload):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = str(preload)
    r = subprocess.run([str(exe), "1", *args, "--quick"], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 1, r.stdout
    m = re.fullmatch(r"(\w+): .* checksum=([0-9a-f]{16})", lines[0])
    assert m and m.group(1) == exe.name, lines[0]
    return lines[0]


@pytest.mark.skipif(not LOCUS.exists(), reason="build/lib/liblocus.so is not built yet")
@pytest.mark.parametrize("program,args", QUICK_RUNS,
                         ids=[" ".join([p, *a]) for p, a in QUICK_RUNS])
def test_quick_checksum_is_the_same_under_glibc_and_locus(program, args):
    exe = BUILD / "bench" / program
    if not exe.exists():
        pytest.skip(f"{exe} is not built yet")
    assert checksum(exe, args, None) == checksum(exe, args, LOCUS)
