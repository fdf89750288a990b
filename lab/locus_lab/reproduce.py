"""`locus reproduce`: each seed's headline experiment, scaled to fit well under half an hour on
two cores, run with the lab's own commands (compare and its suites, paging, the hardware cost
model), and one page (reproduce_page.py) that sets each headline figure of the paper beside the
figure measured here, says whether the shape agrees, and gives the command that reproduces it
alone.

Every experiment is one `locus ...` command run as a child process into its own folder under
the output folder, so its folder is the same as the command run by hand would write, and a
failure (a crash, a missing library) is that experiment's result while the others go on. The
headlines are then read from the folders' JSON files.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from rich.console import Console

from . import reproduce_page, session
from .common import LabError, find_paths

JSON_FILE = "reproduce.json"
# How the shape of a measured figure compares with the paper's claim.
AGREES, PARTLY, DISAGREES, NOT_MEASURED = "yes", "partly", "no", "not measured"


@dataclass
class Options:
    output: str | None = None
    quick: bool = False
    only: str | None = None
    build_dir: str | None = None
    timeout: float = 1800.0
    argv: list = field(default_factory=list)


@dataclass
class Experiment:
    key: str                    # its folder's name, and what --only takes (or the seed's number)
    seed: str
    title: str
    options: list               # `locus` arguments before --output (the subcommand first)
    program: list               # the program after --, paths relative to the repository
    scaled: str                 # how it differs from the paper's experiment
    minutes: float              # expected on two cores
    plots: tuple                # files of its folder shown on the page
    headlines: Callable         # (folder) -> list of headline dicts (headline())
    quick_options: list | None = None
    quick_program: list | None = None
    tool: list | None = None    # a program of the build instead of a `locus` command

    def argv(self, quick: bool) -> tuple[list, list]:
        opts = self.quick_options if quick and self.quick_options is not None else self.options
        prog = self.quick_program if quick and self.quick_program is not None else self.program
        return opts, prog

    def command(self, quick: bool, folder: str) -> str:
        """The command that reproduces this experiment alone."""
        if self.tool:
            return " ".join(shlex.quote(a) for a in self.tool) + f" > {folder}/hwcost.json"
        opts, prog = self.argv(quick)
        words = ["locus", *opts, "-o", folder] + (["--", *prog] if prog else [])
        return " ".join(shlex.quote(w) for w in words)


def headline(seed: str, what: str, claim: str, paper: str, measured: str, agrees: str,
             why: str = "", values: dict | None = None) -> dict:
    """One row of the page: the paper's claim (a quotation) and its figure, the figure
    measured here, whether the shape agrees, and why (or why not)."""
    return {"seed": seed, "what": what, "claim": claim, "paper": paper, "measured": measured,
            "agrees": agrees, "why": why, "values": values or {}}


def _load(folder: Path, name: str = "summary.json") -> dict:
    try:
        return json.loads((folder / name).read_text())
    except (OSError, ValueError) as e:
        raise LabError(f"{folder / name}: {e}") from None


def _geo(summary: dict, allocator: str, key: str) -> float | None:
    return (summary.get("geomean", {}).get(allocator) or {}).get(key)


def _x(v) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def _judge(all_of: list, any_of: list | None = None) -> str:
    """yes when every condition holds, partly when one of `any_of` (default: of all_of)
    does, else no; conditions that could not be computed (None) count as failed."""
    if all_of and all(c is True for c in all_of):
        return AGREES
    return PARTLY if any(c is True for c in (any_of if any_of is not None else all_of)) \
        else DISAGREES


def _lt(a, b) -> bool | None:
    return None if a is None or b is None else a < b


# ---- seed 000: Vam against PHKmalloc and the DLmalloc-like glibc ----------------------------

VAM_ALLOCS = "glibc,locus-vam,locus-phk,locus-phk-sc"
# The default suite's workloads that its geometric means count (not the thread-count variants).
SUITE_WORKLOADS = ("churn,linked,threads2,mixed_realloc,burst,xthreads,xserver,bigbuf,batches,"
                   "python,gcc,perl,sqlite")


def _vam_suite(folder: Path) -> list:
    s = _load(folder)
    vam, phk = _geo(s, "locus-vam", "wall_norm"), _geo(s, "locus-phk", "wall_norm")
    out = [headline(
        "000", "run time",
        "On average, Vam is 4% and 8% faster than PHKmalloc and DLmalloc, respectively.",
        "Vam 0.92x DLmalloc, 0.96x PHKmalloc",
        f"Vam {_x(vam)} glibc, {_x(vam / phk if vam and phk else None)} PHK",
        _judge([_lt(vam, 1.0), _lt(vam, phk)]),
        "geometric means of the medians over the workloads; glibc's malloc descends from "
        "DLmalloc", {"vam_vs_glibc": vam, "phk_vs_glibc": phk})]
    frag = {a: _geo(s, a, "frag") for a in ("glibc", "locus-vam", "locus-phk", "locus-phk-sc")}
    out.append(headline(
        "000", "fragmentation",
        "DLmalloc, an allocator known for low fragmentation, in fact leads to the highest "
        "fragmentation on average. [...] Our PHK_sc variant [...] yields the lowest "
        "fragmentation (under 10%). Vam [...] nearly matches PHK_sc's low fragmentation.",
        "DLmalloc highest; PHK_sc under 1.10; Vam close to PHK_sc",
        ", ".join(f"{a.removeprefix('locus-')} {v:.2f}" for a, v in frag.items() if v),
        _judge([_lt(frag["locus-vam"], frag["glibc"]),
                _lt(frag["locus-phk-sc"], frag["locus-phk"])]),
        "peak anonymous memory / peak live bytes requested, geometric means",
        {k.removeprefix("locus-"): v for k, v in frag.items()}))
    return out


def _vam_cache(folder: Path) -> list:
    s = _load(folder)
    vam, phk = _geo(s, "locus-vam", "ll_misses_norm"), _geo(s, "locus-phk", "ll_misses_norm")
    return [headline(
        "000", "L2 (last-level) cache misses",
        "On average, Vam reduces L2 cache misses by 39% over DLmalloc.",
        "Vam 0.61x DLmalloc", f"Vam {_x(vam)} glibc, PHK {_x(phk)} glibc",
        _judge([_lt(vam, 1.0), _lt(vam, phk)], [_lt(vam, 1.0)]),
        "cachegrind's simulated last level, geometric mean", {"vam": vam, "phk": phk})]


def _misses(run: dict, i: int) -> tuple[int | None, float | None]:
    pre = run.get("prefetch") or []
    if i >= len(pre) or not pre[i]["misses"]:
        return None, None
    return pre[i]["misses"], pre[i]["prefetchable"] / pre[i]["misses"]


def _vam_paging(folder: Path) -> list:
    data = _load(folder, "paging.json")
    runs = {r["allocator"]: r for r in data["runs"] if "error" not in r}
    sizes = data["meta"]["sizes_pages"]
    i = 0  # the smallest memory: where memory is scarcest
    mib = sizes[i] * data["meta"]["page_bytes"] / (1 << 20) if sizes else 0
    got = {a: _misses(r, i) for a, r in runs.items()}
    vam = got.get("locus-vam", (None, None))
    ratio = {a: (m / vam[0] if m and vam[0] else None) for a, (m, _) in got.items()}
    pre = {a: p for a, (_, p) in got.items()}
    return [headline(
        "000", f"page misses when memory is scarce ({mib:g} MiB)",
        "When physical memory is scarce, Vam outperforms these allocators by over 10X and "
        "up to 2X, respectively.",
        "DLmalloc over 10x, PHKmalloc up to 2x Vam's time",
        f"LRU misses: glibc {_x(ratio.get('glibc'))}, PHK {_x(ratio.get('locus-phk'))} Vam's",
        _judge([_lt(1.0, ratio.get("glibc")), _lt(1.0, ratio.get("locus-phk"))]),
        "simulated LRU page misses (the paper's times come from real paging)", ratio),
        headline(
        "000", f"swap prefetchability ({mib:g} MiB)",
        "Vam nearly matches this prefetchability (79% prefetchable) while the other two "
        "general-purpose allocators result in less prefetchability.",
        "Vam 79% (197.parser), the others less",
        ", ".join(f"{a.removeprefix('locus-')} {_pct(p)}" for a, p in pre.items()),
        _judge([_lt(pre.get("glibc"), pre.get("locus-vam")),
                _lt(pre.get("locus-phk"), pre.get("locus-vam"))]),
        "share of the LRU misses found in a 256-page buffer filled in 8-page clusters",
        {a.removeprefix("locus-"): p for a, p in pre.items()})]


# ---- seed 001: TP and Medius -------------------------------------------------------------------

def _hints(folder: Path) -> list:
    s = _load(folder)
    acc = {r["allocator"]: r for r in s.get("accuracy", []) if r["workload"] == "list"}
    rows = {(r["allocator"], r["mode"]): r for r in s.get("results", [])
            if r["workload"] == "list"}

    def page(a, key="page_hints"):
        return (acc.get(a) or {}).get(key)

    def time_of(a):
        return (rows.get((a, "hints")) or {}).get("time_vs_base")

    tp, med, glibc = page("locus-tp"), page("locus-medius"), page("glibc", "page_no_hints")
    t_tp, t_med = time_of("locus-tp"), time_of("locus-medius")
    return [headline(
        "001", "page accuracy (list)",
        "Locality (page accuracy) 1. Medius-12 (42%) [...] 4. TP-12 (35%) [...] 9. dlmalloc "
        "(25%)",
        "Medius 42%, TP 35%, dlmalloc 25%",
        f"Medius {_pct(med)}, TP {_pct(tp)}, glibc {_pct(glibc)}",
        _judge([_lt(glibc, tp), _lt(glibc, med), _lt(tp, med)], [_lt(glibc, tp),
                                                                 _lt(glibc, med)]),
        "share of hinted nodes on the hint's page", {"tp": tp, "medius": med,
                                                     "glibc": glibc}),
        headline(
        "001", "time against dlmalloc (list)",
        "TP vs dlmalloc • Time: 5-7% [...] Medius vs dlmalloc • Time: 0%",
        "TP 0.93-0.95x, Medius 1.00x",
        f"TP {_x(t_tp)}, Medius {_x(t_med)} glibc (build and walk, with hints)",
        _judge([_lt(t_tp, 1.0), _lt(t_tp, t_med)], [_lt(t_tp, 1.0)]),
        "against glibc without hints on the same workload", {"tp": t_tp, "medius": t_med})]


# ---- seed 002: LF against power-of-two bins --------------------------------------------------

def _lf(folder: Path) -> list:
    s = _load(folder)
    cells = {r["allocator"]: r for r in s.get("results", []) if r["workload"] == "shbench"}
    frag = {a: (cells.get(a) or {}).get("frag_rss") for a in ("locus-pow2", "locus-lf")}
    t_pow2, t_lf = ((cells.get(a) or {}).get("wall_s") for a in ("locus-pow2", "locus-lf"))
    speed = t_pow2 / t_lf if t_pow2 and t_lf else None
    return [headline(
        "002", "fragmentation (shbench)",
        "In the benchmark shbench, Hoard allocates 3 times more memory than it actually uses "
        "while our LF only allocates less than 30% more.",
        "power-of-two bins 3x, LF under 1.3x",
        f"pow2 {frag['locus-pow2'] or 0:.2f}, LF {frag['locus-lf'] or 0:.2f}",
        _judge([_lt(frag["locus-lf"], frag["locus-pow2"]), _lt(frag["locus-lf"], 1.3)]),
        "peak RSS / peak live bytes requested (the seed's definition)",
        {"pow2": frag["locus-pow2"], "lf": frag["locus-lf"]}),
        headline(
        "002", "time (shbench)",
        "especially in the shbench, Hoard is 1.7 times slower than our LF.",
        "power-of-two bins 1.7x LF's time",
        f"pow2 {_x(speed)} LF's time",
        _judge([_lt(1.3, speed)], [_lt(1.05, speed)]),
        "medians; the paper attributes its gain to TLB misses of a 3x larger heap",
        {"pow2_over_lf": speed})]


# ---- seed 003: the hybrid bitmap search --------------------------------------------------------

def _hwcost(folder: Path) -> list:
    d = _load(folder, "hwcost.json")
    hy, ch = d["hybrid"], d["chang"]
    return [headline(
        "003", "gates of the hybrid unit (4 KiB pages, 16-byte objects)",
        "For the overall system, we need 502 AND gates and 502 OR gates.",
        "502 AND + 502 OR", f"{hy['and_gates']} AND + {hy['or_gates']} OR",
        _judge([hy["and_gates"] == 502 and hy["or_gates"] == 502]),
        "the cost model of docs/hwcost.md", {"and": hy["and_gates"], "or": hy["or_gates"]}),
        headline(
        "003", "critical path (2 GiB managed)",
        "The total critical path delay will be 108 logic gate delays. For our approach, the "
        "critical path incurs only 16 gate delays.",
        "Chang 108, hybrid 16 gate delays",
        f"Chang {ch['critical_path']['total']}, hybrid {hy['critical_path']['total']}",
        _judge([ch["critical_path"]["total"] == 108, hy["critical_path"]["total"] == 16]),
        "", {"chang": ch["critical_path"]["total"], "hybrid": hy["critical_path"]["total"]})]


def _phk_hw(folder: Path) -> list:
    s = _load(folder)
    cells = {r["allocator"]: r for r in s.get("results", [])}
    hw = (cells.get("locus-phk-hw") or {}).get("instructions_norm")
    return [headline(
        "003", "PHK-hw against PHK (instructions)",
        "The average overall execution speedup of our design when compared to a software "
        "only allocator implementation is 1.127 (or 12.7%).",
        "software PHK 1.127x the hybrid's cycles",
        f"PHK {_x(1 / hw if hw else None)} PHK-hw's instructions",
        _judge([_lt(hw, 1 / 1.05)], [_lt(hw, 1.0)]),
        "whole-program instructions (cachegrind) on 16-byte objects, where a page's bitmap "
        "is 4 words; the seed's software searched bit by bit", {"phk_hw_vs_phk": hw})]


# ---- seed 004: Reap against regions and emulation ---------------------------------------------

def _regions(folder: Path) -> list:
    s = _load(folder)
    rows = {(r["workload"], r["mode"], r["allocator"]): r for r in s.get("results", [])}
    flag = s.get("flagship") or "locus-vam"

    def get(w, mode, a, key):
        return (rows.get((w, mode, a)) or {}).get(key)

    reap_bump = {w: (get(w, "locus", flag, "cpu_s") / get(w, "bump", "glibc", "cpu_s")
                     if get(w, "locus", flag, "cpu_s") and get(w, "bump", "glibc", "cpu_s")
                     else None) for w in ("compiler", "parser", "server")}
    emu = {w: (get(w, "bump", "glibc", "cpu_s") / get(w, "emulate", "glibc", "cpu_s")
               if get(w, "bump", "glibc", "cpu_s") and get(w, "emulate", "glibc", "cpu_s")
               else None) for w in ("compiler", "parser", "server")}
    drag = {m: get("parser", m, a, "held_live_area")
            for m, a in (("bump", "glibc"), ("locus", flag), ("emulate", "glibc"))}

    def ratios(d):
        return ", ".join(f"{w} {_x(v)}" for w, v in d.items() if v)

    return [headline(
        "004", "regions against malloc/free",
        "The two exceptions use regions, which deliver higher performance (up to 44% faster).",
        "regions up to 0.56x the time", f"bump region / emulation under glibc: {ratios(emu)}",
        _judge([_lt(v, 1.0) for v in emu.values() if v is not None]), "CPU time, medians",
        emu),
        headline(
        "004", "Reap against regions",
        "Reap yields only 10% overhead for both lcc and mudlle, achieving performance "
        "comparable to the original custom allocators",
        "Reap 1.10x regions", f"Locus regions / bump region: {ratios(reap_bump)}",
        _judge([_lt(reap_bump["compiler"], 1.10)],
               [_lt(reap_bump["compiler"], 1.25)]),
        "the compiler workload frees nothing (lcc's case); parser and server free objects "
        "early, which a bump region ignores", reap_bump),
        headline(
        "004", "memory held by regions (drag, parser)",
        "the inability of programmers to free individual objects within regions can lead to a "
        "substantial increase in memory consumption (up to 230% more).",
        "regions up to 3.3x the memory needed",
        f"held/live: bump region {drag['bump'] or 0:.2f}, Locus regions {drag['locus'] or 0:.2f}"
        f", emulation {drag['emulate'] or 0:.2f}",
        _judge([_lt(drag["locus"], drag["bump"]), _lt(1.5, drag["bump"])],
               [_lt(drag["locus"], drag["bump"])]),
        "area under memory held / area under memory needed over allocation time", drag)]


# ---- the plan -----------------------------------------------------------------------------

def experiments(paths) -> list:
    bench = str(paths.bench.relative_to(paths.root)) if paths.bench.is_relative_to(
        paths.root) else str(paths.bench)
    hwcost = paths.build / "bin" / "locus-hwcost"
    return [
        Experiment("000-suite", "000", "Vam, PHKmalloc, PHK_sc and glibc: time and "
                   "fragmentation",
                   ["compare", "-a", VAM_ALLOCS, "-w", SUITE_WORKLOADS, "-r", "3",
                    "--budget", "0"], [],
                   "the 13 workloads of the default suite's geometric means instead of four "
                   "SPEC programs; glibc (a DLmalloc descendant) for DLmalloc", 4.5,
                   ("time.png", "frag.png"),
                   _vam_suite,
                   quick_options=["compare", "--quick", "-a", VAM_ALLOCS, "-w", "churn,python",
                                  "-r", "2"]),
        Experiment("000-cache", "000", "Vam, PHKmalloc and glibc: simulated cache misses",
                   ["compare", "--quick", "--cache", "--no-frag", "-a",
                    "glibc,locus-vam,locus-phk", "-w", "churn,python,perl"], [],
                   "the --quick inputs (1/20 of the work) under cachegrind's simulated "
                   "caches instead of hardware counters", 1.5, ("cache.png",), _vam_cache,
                   quick_options=["compare", "--quick", "--cache", "--no-frag", "-a",
                                  "glibc,locus-vam,locus-phk", "-w", "churn"]),
        Experiment("000-paging", "000", "Vam, PHKmalloc and glibc: LRU page misses and swap "
                   "prefetchability",
                   ["paging", "-a", "locus-vam,locus-phk,glibc", "--sizes", "1M,2M,4M"],
                   [f"{bench}/hints", "list", "--no-hints", "--scale", "0.25", "--passes",
                    "4"],
                   "a list of 75,000 nodes built amid temporaries and walked 4 times (5.7 MiB "
                   "touched) under valgrind's lackey, instead of SPEC programs under real "
                   "memory pressure", 3.0, ("paging-misses.png", "paging-prefetch.png"),
                   _vam_paging,
                   quick_program=[f"{bench}/hints", "list", "--no-hints", "--scale", "0.01",
                                  "--passes", "1"]),
        Experiment("001-hints", "001", "TP and Medius against glibc: page accuracy and time",
                   ["compare", "--suite", "hints", "-w", "list,tree,events", "-a",
                    "glibc,locus-tp,locus-medius", "-r", "3"], [],
                   "three STL programs of our own instead of the seed's; the headlines are "
                   "the list's (300k nodes built amid temporaries, walked 100 times), where "
                   "the hint's page has room (in tree and events it is full: no design "
                   "places near it); glibc for dlmalloc", 1.0,
                   ("hints_accuracy.png", "hints_time.png"), _hints,
                   quick_options=["compare", "--suite", "hints", "--quick", "-w", "list", "-a",
                                  "glibc,locus-tp,locus-medius"]),
        Experiment("002-lf", "002", "LF against power-of-two bins on shbench",
                   ["compare", "--suite", "lf", "-w", "shbench", "-a",
                    "glibc,locus-pow2,locus-lf", "-r", "3"], [],
                   "our shbench-like program (1M live objects of 70/100/150 B); Locus's "
                   "pow2 build stands in for Hoard's power-of-two bins", 0.5, ("frag.png",
                                                                               "time.png"),
                   _lf,
                   quick_options=["compare", "--suite", "lf", "--quick", "-w", "shbench", "-a",
                                  "glibc,locus-pow2,locus-lf", "-r", "2"]),
        Experiment("003-hwcost", "003", "Table I: gates and gate delays", [], [],
                   "the cost model computed for the paper's parameters (no hardware)", 0.1,
                   (), _hwcost, tool=[str(hwcost), "--json"]),
        Experiment("003-phk-hw", "003", "PHK-hw against PHK: instructions",
                   ["compare", "--cache", "--no-frag", "-r", "1", "-a",
                    "locus-phk,locus-phk-hw", "--baseline", "locus-phk"],
                   [f"{bench}/smallobj", "1", "8", "16"],
                   "instructions (cachegrind) instead of SimpleScalar cycles, on a program of "
                   "8-16 byte objects (like cfrac)", 0.5, ("cache.png",), _phk_hw,
                   quick_program=[f"{bench}/churn", "1", "--quick"]),
        Experiment("004-regions", "004", "Reap (Locus regions) against regions and "
                   "malloc/free emulation: time, memory, drag",
                   ["compare", "--suite", "regions", "-r", "3"], [],
                   "three region programs of our own modelled on lcc, 197.parser and apache",
                   2.0, ("regions_time.png", "regions_memory.png", "regions_profile.png"),
                   _regions,
                   quick_options=["compare", "--suite", "regions", "--quick", "-w",
                                  "compiler,parser"]),
    ]


def _chosen(plan: list, only: str | None) -> list:
    if not only:
        return plan
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    known = {e.key for e in plan} | {e.seed for e in plan}
    bad = [w for w in wanted if w not in known]
    if bad:
        raise LabError(f"unknown experiment '{bad[0]}'; available: "
                       + ", ".join(e.key for e in plan) + " (or a seed: 000 ... 004)")
    return [e for e in plan if e.key in wanted or e.seed in wanted]


def _run_one(e: Experiment, quick: bool, folder: Path, root: Path, log: Path,
             timeout: float) -> tuple[str, str]:
    """Runs one experiment into `folder`; returns its status and the last line it wrote on
    failure."""
    folder.mkdir(parents=True, exist_ok=True)
    if e.tool:
        argv, out = e.tool, folder / "hwcost.json"
    else:
        opts, prog = e.argv(quick)
        argv = [sys.executable, "-m", "locus_lab", *opts, "-o", str(folder)] + \
            (["--", *prog] if prog else [])
        out = None
    env = dict(os.environ, COLUMNS="120")
    try:
        with open(log, "w") as lf, (open(out, "w") if out else open(os.devnull, "w")) as so:
            r = subprocess.run(argv, cwd=root, env=env, stdout=so if out else lf, stderr=lf,
                               stdin=subprocess.DEVNULL, timeout=timeout)
    except FileNotFoundError as err:
        return "failed", str(err)
    except subprocess.TimeoutExpired:
        return "timeout", f"longer than {timeout:.0f} s"
    if r.returncode != 0:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
        return f"exit {r.returncode}", (lines[-1] if lines else "")
    return "ok", ""


def _headlines(e: Experiment, folder: Path) -> tuple[list, str]:
    """The experiment's headlines read from its folder, and an error ("" when read)."""
    try:
        return e.headlines(folder), ""
    except (LabError, KeyError, TypeError, ZeroDivisionError) as err:
        return [], str(err)


def redraw(folder: Path, console: Console, build_dir: str | None = None) -> list:
    """`locus report DIR` for a reproduce folder: the headlines read again from the
    experiments' folders (the figures are the runs'; the reading may have changed) and the
    page written again. Returns the files written."""
    data = json.loads((folder / JSON_FILE).read_text())
    plan = {e.key: e for e in experiments(find_paths(build_dir))}
    for entry in data["experiments"]:
        e = plan.get(entry["key"])
        if e and entry["status"] in ("ok", "unreadable"):
            entry["headlines"], error = _headlines(e, folder / entry["folder"])
            entry["status"] = "unreadable" if error else "ok"
            entry.pop("error", None)
            if error:
                entry["error"] = error
    (folder / JSON_FILE).write_text(json.dumps(data, indent=2) + "\n")
    return [JSON_FILE] + reproduce_page.write(folder, data)


def run_reproduce(opts: Options, console: Console) -> int:
    paths = find_paths(opts.build_dir)
    plan = _chosen(experiments(paths), opts.only)
    out = Path(opts.output) if opts.output else Path("results") / "reproduce"
    if out.exists() and not out.is_dir():
        raise LabError(f"--output {out} is a file, not a folder")
    try:
        (out / "logs").mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise LabError(f"cannot write to {out}: {e.strerror or e}") from None
    total = sum(e.minutes for e in plan)
    console.print(f"[bold]locus reproduce[/bold]: {len(plan)} experiment(s) of seeds "
                  f"{', '.join(sorted({e.seed for e in plan}))}"
                  + (" (--quick: tiny inputs)" if opts.quick else
                     f"; about {total:.0f} min on 2 cores") + f" -> {out}/")
    started = time.monotonic()
    load = os.getloadavg()[0]
    done = []
    try:
        for e in plan:
            folder = out / e.key
            t0 = time.monotonic()
            console.print(f"[{session.format_duration(t0 - started):>6}] {e.key}: {e.title}")
            status, tail = _run_one(e, opts.quick, folder, paths.root,
                                    out / "logs" / f"{e.key}.log", opts.timeout)
            entry = {"key": e.key, "seed": e.seed, "title": e.title, "scaled": e.scaled,
                     "command": e.command(opts.quick, str(folder)), "status": status,
                     "seconds": round(time.monotonic() - t0, 1), "folder": e.key,
                     "plots": [p for p in e.plots if (folder / p).exists()], "headlines": []}
            if status == "ok":
                entry["headlines"], tail = _headlines(e, folder)
                status = entry["status"] = "unreadable" if tail else "ok"
            if status != "ok":
                entry["error"] = tail
                console.print(session.failure_line(f"  {e.key}", status, tail))
            for h in entry["headlines"]:
                console.print(f"  {h['what']}: paper {h['paper']}; here {h['measured']} "
                              f"-> agrees: {h['agrees']}")
            done.append(entry)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: the page covers the experiments so far[/yellow]")
    data = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": "locus " + " ".join(shlex.quote(a) for a in opts.argv),
            "quick": opts.quick, "machine": session.machine_info(),
            "load_at_start": round(load, 2), "wall_s": round(time.monotonic() - started, 1),
            "experiments": done}
    (out / JSON_FILE).write_text(json.dumps(data, indent=2) + "\n")
    files = reproduce_page.write(out, data)
    console.print(f"\nwrote {out}/: {JSON_FILE}, " + ", ".join(files)
                  + f"; took {session.format_duration(data['wall_s'])}")
    return 0 if all(e["status"] == "ok" for e in done) and done else 1
