"""Workloads: the default suite shipped in the repository, or the user's own command.

The default suite is the bench programs (build/bench/<name>, allocation-intensive C
programs written for Locus) plus real programs on inputs kept in lab/suite/: CPython, gcc,
perl and sqlite3. Sizes are chosen so each runs about 1.5-2.5 s under glibc on a 2-core
machine; --quick uses tiny inputs: the real programs' smallest, and the bench programs that
accept it get `--quick` (1/20 of their work at scale 1; linked and burst ignore --quick).
"""
from __future__ import annotations

import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple

from .common import SUITE_DIR, LabError, Paths

# The pair of workloads two-thread scaling is computed from (results.two_thread_scaling):
# the same program, the same per-thread work, one thread and two.
SCALING_ONE, SCALING_TWO = "threads1", "threads2"
# Many-thread runs (results.many_thread): threads2's loop with the total work of SCALING_TWO
# split over N threads (`threads2 1 N --split`), so time / time(SCALING_TWO) is the cost of
# the same work on N threads.
MANY_THREADS = {"threads8": 8, "threads16": 16}


class Bench(NamedTuple):
    name: str
    extra: list                 # arguments after the scale
    nominal_s: float            # seconds under glibc
    what: str
    program: str = ""           # build/bench/<program>; "" = the workload's name
    in_geomean: bool = True
    quick: bool = True          # the program takes --quick (1/20 of the work)


BENCH = (
    Bench("churn", [], 1.5, "small-object churn, 100k live objects"),
    Bench("linked", [], 1.5, "linked structures built amid temporaries, then walked",
          quick=False),
    # A baseline, not a workload of its own: it is threads2's work on one thread. Counting
    # it in the geometric means would weigh the threads2 loop twice and make them
    # incomparable with results made before it existed.
    Bench(SCALING_ONE, ["1"], 1.5, "one thread churning privately: threads2's baseline "
          "for scaling", program="threads2", in_geomean=False),
    Bench(SCALING_TWO, ["2"], 1.5, "two threads churning privately"),
    Bench("mixed_realloc", [], 1.5, "buffers grown by realloc, 16 B to 1 MiB"),
    Bench("burst", [], 1.5, "a 300 MiB peak, then a quiet phase", quick=False),
    Bench("xthreads", [], 1.5, "8 short-lived threads at a time passing objects through "
          "a shared table"),
    Bench("xserver", [], 1.5, "4 worker seats whose threads are replaced; each frees what "
          "the one before allocated"),
    Bench("bigbuf", [], 2.0, "5-25 MiB calloc'd buffers replaced at random, then filled"),
    Bench("batches", [], 1.5, "batches of 25..1600 same-size objects freed FIFO and LIFO"),
    # Servers (issue 26's shapes): workers replaced by their own successors, large objects
    # between threads, producers and consumers, thread-local arrays, a large random live set.
    Bench("turnover", [], 0.6, "4 chains of workers; each creates its successor, hands it its "
          "table of 8-1000 B objects and exits"),
    Bench("xlarge", [], 0.6, "rounds of 4 threads passing objects up to ~5 MiB through a shared "
          "table"),
    # One pair, so that the two threads run on two cores and every free crosses cores. With
    # the program's default of two pairs on a 2-core machine the four threads spin on
    # sched_yield, and where the scheduler first puts them decides the time: every allocator
    # then ran 0.4-2.4 s from one run to the next (docs/results.md, "The closing run on an
    # Intel host").
    Bench("prodcons", ["1"], 4.5, "1 producer allocates small objects, 1 consumer on the "
          "other core frees them"),
    Bench("localarrays", [], 0.6, "2 threads replacing objects of 4 B-32 KiB in their own "
          "1,024-slot arrays"),
    Bench("randsmall", [], 0.7, "random replacements in a 250,000-object live set of small "
          "objects"),
    # Like threads1, shown but left out of the geometric means: the threads2 loop again (and
    # means comparable with results made before them). results.many_thread relates them to
    # threads2.
    *(Bench(name, [str(n), "--split"], 1.5, f"threads2's work split over {n} threads",
            program="threads2", in_geomean=False) for name, n in MANY_THREADS.items()),
)


@dataclass
class Workload:
    name: str
    argv: list
    cwd: str | None = None
    env: dict = field(default_factory=dict)
    nominal_s: float = 2.0      # expected run time under glibc, for the estimate
    description: str = ""
    kind: str = "program"       # "bench", "program" or "command"
    frag: bool = True           # False: most of its heap is not malloc's (no fragmentation)
    in_geomean: bool = True     # False: shown in the tables, left out of the geometric means

    def to_json(self) -> dict:
        return asdict(self)


def _which(program: str) -> str | None:
    return shutil.which(program)


def _python() -> str | None:
    # Debian's interpreter: a build with the C allocator underneath, as shipped.
    return "/usr/bin/python3" if Path("/usr/bin/python3").exists() else _which("python3")


def real_programs(quick: bool) -> tuple[list, list]:
    """python3, gcc, perl and sqlite3 on inputs from lab/suite/ (skipped if not installed)."""
    found, warnings = [], []
    python = _python()
    if python:
        found.append(Workload(
            "python", [python, str(SUITE_DIR / "alloc_heavy.py"), "1" if quick else "8"],
            env={"PYTHONMALLOC": "malloc"}, nominal_s=0.3 if quick else 2.0,
            description="CPython building dicts, trees, records (PYTHONMALLOC=malloc)"))
    else:
        warnings.append("python3 not found: skipping the python workload")
    gcc = _which("gcc") or _which("cc")
    if gcc:
        found.append(Workload(
            "gcc", [gcc, "-O2", "-c", str(SUITE_DIR / "compile_me.c"),
                    "-DCOPIES=" + ("1" if quick else "12"), "-o", "/dev/null"],
            nominal_s=0.5 if quick else 2.0, description="gcc -O2 compiling a C file",
            # cc1 keeps its trees in its own garbage-collected heap (mmap), which the tracer
            # never sees: a fragmentation ratio would measure that, not the allocator (its
            # malloc heap is still traced for the report).
            frag=False))
    else:
        warnings.append("gcc not found: skipping the gcc workload")
    perl = _which("perl")
    if perl:
        found.append(Workload(
            "perl", [perl, str(SUITE_DIR / "text_heavy.pl"), "1" if quick else "6"],
            nominal_s=0.4 if quick else 2.0, description="perl tokenising, counting, sorting text"))
    else:
        warnings.append("perl not found: skipping the perl workload")
    sqlite = _which("sqlite3")
    if sqlite:
        rows = 5000 if quick else 200000
        found.append(Workload(
            "sqlite", [sqlite, ":memory:", "-cmd", f".parameter set @rows {rows}",
                       f".read {SUITE_DIR / 'rows.sql'}"],
            nominal_s=0.1 if quick else 2.0,
            description=f"sqlite3: a {rows:,}-row table built, indexed, queried"))
    else:
        warnings.append("sqlite3 not found: skipping the sqlite workload "
                        "(apt-get install sqlite3)")
    return found, warnings


def bench_programs(paths: Paths, quick: bool = False,
                   benches: tuple = BENCH) -> tuple[list, list]:
    found, missing = [], []
    for b in benches:
        exe = paths.bench / (b.program or b.name)
        if exe.is_file():
            fast = quick and b.quick
            argv = [str(exe), "1", *b.extra] + (["--quick"] if fast else [])
            found.append(Workload(b.name, argv, nominal_s=b.nominal_s / (20 if fast else 1),
                                  description=b.what, kind="bench", in_geomean=b.in_geomean))
        else:
            missing.append(b.name)
    warnings = []
    if missing:
        warnings.append(f"bench programs not built, skipped: {', '.join(missing)} "
                        f"(expected in {paths.bench}; run `make`)")
    return found, warnings


# `locus compare --suite lf` (seed 002): our own programs shaped like the benchmarks the seed
# measures its custom bins on. Not in the default suite, whose time budget they would break.
LF_SUITE = "lf"
LF_DESIGNS = ("pow2", "lf", "vam-sites")   # Locus designs (or variants) in the lf suite by default
LF_BENCH = (
    Bench("shbench", [], 1.0, "1M live objects of 70/100/150 B (+5% 64..180 B) from 5 call "
          "sites, random and burst replacement"),
    Bench("espresso", [], 1.0, "small objects of varied sizes: 70% temporaries, 25% working "
          "set (some grown by realloc), 5% a cover freed every pass"),
    Bench("larson", [], 1.0, "8 threads replacing objects at random in one shared pool "
          "(freed by other threads)"),
    Bench("threadtest", [], 1.0, "4 threads each allocating and freeing batches of 20,000 "
          "objects of its own size (24/72/100/150 B)"),
    Bench("sites", [], 1.0, "two call sites interleave 48-byte objects; only one site's (a "
          "list of 400k nodes) is walked, 40 times"),
    Bench("twophase", [], 1.0, "1.5M objects of 70/100/150 B loaded from 3 call sites, then 6M "
          "random replacements of the same sizes from 3 other sites"),
)


def lf_suite(paths: Paths, quick: bool) -> tuple[list, list]:
    """The lf suite's workloads (bench programs not built are skipped with a note)."""
    return bench_programs(paths, quick, LF_BENCH)


def default_suite(paths: Paths, quick: bool) -> tuple[list, list]:
    bench, w1 = bench_programs(paths, quick)
    real, w2 = real_programs(quick)
    return bench + real, w1 + w2


def select_workloads(workloads: list, spec: str | None, kind: str = "") -> list:
    """The workloads (Workload objects, or names) named in spec, "a,b,c"; all without one."""
    if not spec:
        return workloads
    by_name = {(w if isinstance(w, str) else w.name): w for w in workloads}
    chosen = []
    for name in (s.strip() for s in spec.split(",")):
        if not name:
            continue
        if name not in by_name:
            raise LabError(f"unknown or unavailable {kind}workload '{name}'; available: "
                           + ", ".join(by_name))
        chosen.append(by_name[name])
    if not chosen:
        raise LabError("no workload selected")
    return chosen


def is_static_elf(path: str) -> bool:
    """True for a 64-bit little-endian ELF executable without an interpreter (PT_INTERP):
    the dynamic loader never runs, so LD_PRELOAD cannot put another allocator under it."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return False
            phoff = int.from_bytes(head[32:40], "little")
            phentsize = int.from_bytes(head[54:56], "little")
            phnum = int.from_bytes(head[56:58], "little")
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except OSError:
        return False
    types = [int.from_bytes(table[i:i + 4], "little") for i in range(0, len(table), phentsize)]
    return 3 not in types  # PT_INTERP


def command_workload(argv: list, name: str | None = None) -> Workload:
    """The user's own command, checked before anything runs."""
    if not argv:
        raise LabError("no command given after --")
    program = argv[0]
    if "/" in program:
        p = Path(program)
        if not p.exists():
            raise LabError(f"command not found: {program}")
        if p.is_dir() or not p.stat().st_mode & 0o111:
            raise LabError(f"not an executable file: {program}")
        resolved = str(p.resolve())
    else:
        resolved = _which(program)
        if not resolved:
            raise LabError(f"command not found: {program}")
    label = name or Path(program).name
    return Workload(label, [resolved, *argv[1:]], cwd=None, nominal_s=2.0,
                    description=" ".join(argv), kind="command")
