"""The `locus` command line.

  locus compare [options] [-- COMMAND ...]   a program or the default suite, every allocator
  locus trace [-o FILE] -- COMMAND ...       record every malloc-family call
  locus trace stats FILE                     statistics of a trace
  locus replay TRACE [--allocators ...]      a recorded trace replayed under each allocator
  locus report DIR                           re-draw tables, plots and report from saved runs
  locus list                                 allocators, workloads and tools found
  locus sites [--library NAME] -- COMMAND    per-call-site statistics (LOCUS_SITES)
  locus paging [--allocators ...] -- COMMAND LRU page-miss curves, prefetchability, drag
  locus pressure [--limits ...] -- COMMAND   runs in a memory-limited cgroup, if offered
  locus reproduce [--only 000,...] [--quick] the seeds' headline experiments, one page

Bad input ends with one line on stderr and status 2; an interrupted run with status 130.
"""
from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.table import Table

from . import __version__
from . import allocators as alloc_mod
from . import runner, suite, trace
from .sites import cmd_sites
from .common import LabError, find_paths
from .compare import CompareOptions, run_compare, run_report
from .replay import ReplayOptions, run_replay
from .paging import DEFAULT_ALLOCATORS, DEFAULT_SIZES, PagingOptions, run_paging
from .pressure import PressureOptions, run_pressure
from .reproduce import Options as ReproduceOptions, run_reproduce


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line."""

    def error(self, message):
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        sys.exit(2)


def _positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text}")
    return v


def _positive_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text}")
    return v


# Options several commands share, spelled once so that their help reads the same everywhere.

ALLOCATORS_HELP = f"allocators (default: {DEFAULT_ALLOCATORS}); `all` for every one"


def _allocators_option(p, help: str = ALLOCATORS_HELP):
    p.add_argument("--allocators", "-a", metavar="NAME,...", help=help)


def _output_option(p):
    p.add_argument("--output", "-o", metavar="DIR",
                   help="results folder (default: locus-results/<date-time>)")


def _timeout_option(p, default: float, what: str):
    p.add_argument("--timeout", type=_positive_float, default=default, metavar="SECONDS",
                   help=f"end {what} that takes longer (default {default:.0f})")


def _no_plots_option(p):
    p.add_argument("--no-plots", dest="plots", action="store_false", help="skip the PNG plots")


def _build_dir_option(p):
    p.add_argument("--build-dir", metavar="DIR", help="the build folder")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="locus", description="The Locus lab: compare allocators on any program.")
    p.add_argument("--version", action="version", version=f"locus-lab {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    c = sub.add_parser("compare", help="run a program or the default suite under each allocator",
                       description="Run COMMAND (after --), or the default suite, under each "
                       "allocator; report time, memory, fragmentation and cache metrics "
                       "normalised to glibc.")
    c.add_argument("--allocators", "-a", metavar="NAME,...",
                   help="allocators to compare (default: every one found; with --suite "
                   "regions glibc, liblocus.so and the peers; with --suite hints also the "
                   "tp and medius designs, with --suite lf the pow2 and lf designs); `all` "
                   "for every one found; "
                   "NAME=LIB.so adds a library of your own")
    c.add_argument("--workloads", "-w", metavar="NAME,...",
                   help="workloads of the suite to run (default: all)")
    c.add_argument("--suite", choices=("default", "regions", "hints", "lf"), default=None,
                   help="the workloads: the default suite, `regions` (seed 004: region "
                   "programs in each region mode: Locus regions, a bump region, emulation "
                   "over malloc, the peers' arenas), or `hints` (seed 001: STL programs "
                   "with and without allocation hints; accuracy, traversal time, cachegrind), "
                   "or `lf` (seed 002: shbench-, espresso-, larson- and threadtest-like "
                   "programs; the metrics of the default suite)")
    c.add_argument("--repetitions", "-r", type=_positive_int, metavar="N",
                   help="timed runs per allocator and workload (default 3, --quick 1)")
    c.add_argument("--quick", action="store_true",
                   help="tiny inputs and one repetition (for tests)")
    _output_option(c)
    c.add_argument("--cache", action="store_true",
                   help="also one cachegrind run per allocator (instructions, simulated "
                   "L1/LL misses; slow) and perf stat where hardware counters exist")
    c.add_argument("--frag", dest="frag", action="store_true", default=True,
                   help="measure fragmentation: trace each workload once for its peak live "
                   "bytes (default)")
    c.add_argument("--no-frag", dest="frag", action="store_false",
                   help="skip the fragmentation trace")
    c.add_argument("--baseline", metavar="NAME", help="normalise to this allocator "
                   "(default glibc)")
    c.add_argument("--budget", type=float, metavar="MINUTES",
                   help="stop adding repetitions when the next would end after this long "
                   "(default: 14 for the default suite without -r; 0: no limit)")
    _timeout_option(c, 600.0, "a run")
    c.add_argument("--name", help="workload name for COMMAND (default: the program's name)")
    _no_plots_option(c)
    c.add_argument("--build-dir", metavar="DIR", help="the build folder (default: build/ in "
                   "the repository)")

    t = sub.add_parser("trace", help="record every malloc-family call of a program",
                       description="Record every malloc-family call of COMMAND (after --) "
                       "into a binary trace (docs/trace-format.md). `locus trace stats FILE` "
                       "prints its statistics.")
    t.add_argument("--output", "-o", metavar="FILE", default="locus.trace",
                   help="trace file (default: locus.trace); child processes write FILE.<pid>")
    t.add_argument("--allocator", metavar="NAME",
                   help="allocator under the tracer (default: glibc)")
    t.add_argument("--summary", action="store_true",
                   help="write only totals (peak live bytes, ...) instead of every event")
    _build_dir_option(t)

    s = sub.add_parser("trace stats", help="statistics of a trace file",
                       description="Statistics of a trace: seed 000 Table 1, seed 004 Table 3, "
                       "size and lifetime histograms.")
    s.add_argument("file", metavar="FILE")
    s.add_argument("--json", action="store_true", help="print JSON instead of tables")
    s.add_argument("--plot", metavar="PNG", help="also draw the memory profile and histograms")
    s.add_argument("--top", type=_positive_int, default=10, metavar="N",
                   help="call sites to list (default 10)")
    s.add_argument("--pid", type=int, metavar="PID",
                   help="of a process tree's traces (FILE and FILE.<pid>), this process's "
                   "(default: the busiest process's)")

    rp = sub.add_parser("replay", help="replay a recorded trace under each allocator",
                        description="Replay TRACE (from `locus trace`) under each allocator "
                        "with the C replay driver: time, peak memory, fragmentation, the heap "
                        "profile over time, and with --instructions the allocator's "
                        "instructions (callgrind). Writes a results folder like compare.")
    rp.add_argument("traces", nargs="+", metavar="TRACE")
    rp.add_argument("--allocators", "-a", metavar="NAME,...",
                    help="allocators (default: every one found); NAME=LIB.so adds your own")
    rp.add_argument("--repetitions", "-r", type=_positive_int, metavar="N",
                    help="replays per allocator and trace (default 3, --quick 1)")
    rp.add_argument("--quick", action="store_true", help="one repetition")
    _output_option(rp)
    rp.add_argument("--instructions", action="store_true",
                    help="also one callgrind run per allocator counting the instructions and "
                    "simulated cache misses inside the allocator's calls (slow)")
    rp.add_argument("--ordered", action="store_true",
                    help="replay in the trace's global event order, one call at a time "
                    "(exact profiles; slower with several threads)")
    rp.add_argument("--lenient", action="store_true",
                    help="skip releases of blocks the trace never allocated instead of "
                    "refusing the trace")
    rp.add_argument("--pid", type=int, metavar="PID",
                    help="of a process tree's traces (TRACE and TRACE.<pid>), replay this "
                    "process's (default: the busiest process's)")
    rp.add_argument("--baseline", metavar="NAME", help="normalise to this allocator "
                    "(default glibc)")
    _timeout_option(rp, 600.0, "a replay")
    _no_plots_option(rp)
    _build_dir_option(rp)

    r = sub.add_parser("report", help="re-draw tables, plots and the report from a results "
                       "folder")
    r.add_argument("folder", metavar="DIR")
    _no_plots_option(r)

    lst = sub.add_parser("list", help="show the allocators, workloads and tools found")
    _build_dir_option(lst)

    st = sub.add_parser("sites", help="per-call-site statistics of a program (LOCUS_SITES)",
                        description="Run COMMAND (after --) under a Locus library with "
                        "LOCUS_SITES=1 and print its busiest call sites (docs/sites.md).")
    st.add_argument("--library", metavar="NAME", help="liblocus.so (default), a variant "
                    "(lf, tp, ...), a file name in build/lib or a path")
    st.add_argument("--top", type=_positive_int, default=20, metavar="N",
                    help="sites to list (default 20)")
    st.add_argument("--json", metavar="FILE", help="also write the sites' JSON to FILE")
    _build_dir_option(st)
    pg = sub.add_parser("paging", help="LRU page-miss curves, swap prefetchability and object "
                        "drag of a program under each allocator (valgrind lackey; slow)",
                        description="Run COMMAND (after --) under valgrind's lackey once per "
                        "allocator and reduce its data references to pages: the LRU miss "
                        "curve for every memory size, prefetchability at --sizes, and with "
                        "--drag object drag (docs/lab.md).")
    _allocators_option(pg)
    pg.add_argument("--sizes", default=DEFAULT_SIZES, metavar="SIZE,...",
                    help=f"memory sizes for prefetchability, pages or 512K/4M/1G (default "
                    f"{DEFAULT_SIZES}; at most 8)")
    pg.add_argument("--drag", action="store_true",
                    help="also object drag: preload the marking library and charge each "
                    "reference to the live object containing it")
    _output_option(pg)
    _timeout_option(pg, 3600.0, "a lackey run")
    _no_plots_option(pg)
    _build_dir_option(pg)

    pr = sub.add_parser("pressure", help="run a program under each allocator in a "
                        "memory-limited cgroup (cgroup v2 only)",
                        description="Run COMMAND (after --) under each allocator with each "
                        "memory limit (cgroup v2 memory.max): run time and major faults. "
                        "Where the machine has no cgroup v2 memory controller to use, says so "
                        "and points to `locus paging`.")
    _allocators_option(pr)
    pr.add_argument("--limits", default="16M,32M,64M", metavar="SIZE,...",
                    help="memory limits, bytes as 512K/16M/1G (default 16M,32M,64M)")
    _timeout_option(pr, 600.0, "a run")
    _build_dir_option(pr)

    rr = sub.add_parser("reproduce", help="every seed's headline experiment, scaled to about "
                        "12 minutes on 2 cores, into one page (Markdown and HTML)",
                        description="Run each seed's headline experiment with the lab's own "
                        "commands and write reproduce.md and reproduce.html: the paper's "
                        "claim beside the figure measured here, whether the shape agrees, and "
                        "the command that reproduces each alone.")
    rr.add_argument("--output", "-o", metavar="DIR",
                    help="results folder (default: results/reproduce)")
    rr.add_argument("--only", metavar="NAME,...", help="experiments (000-suite, ...) or "
                    "seeds (000 ... 004) to run (default: all)")
    rr.add_argument("--quick", action="store_true",
                    help="tiny inputs (for tests: the figures mean little)")
    _timeout_option(rr, 1800.0, "an experiment")
    _build_dir_option(rr)
    return p


def _split_command(argv: list) -> tuple[list, list]:
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def main(argv: list | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    own, command = _split_command(argv)
    if own[:2] == ["trace", "stats"]:
        own = ["trace stats", *own[2:]]
    parser = build_parser()
    args = parser.parse_args(own)
    console = Console(highlight=False)
    try:
        if args.command == "compare":
            opts = CompareOptions(
                allocators=args.allocators, workloads=args.workloads,
                repetitions=args.repetitions, quick=args.quick, output=args.output,
                cache=args.cache, frag=args.frag, timeout=args.timeout,
                build_dir=args.build_dir, baseline=args.baseline, plots=args.plots,
                budget_min=args.budget, suite=args.suite,
                command=command, name=args.name, argv=argv)
            return run_compare(opts, console)
        if args.command == "replay":
            traces = []
            for given in args.traces:
                traces.append(trace.process_trace(given, args.pid))
                if traces[-1] != given:
                    console.print(f"[yellow]note:[/yellow] {given}: replaying {traces[-1]}"
                                  + ("" if args.pid else " (the busiest process of the "
                                     "tree; --pid PID for another)"))
            return run_replay(ReplayOptions(
                traces=traces,
                allocators=args.allocators, repetitions=args.repetitions, quick=args.quick,
                output=args.output, instructions=args.instructions, ordered=args.ordered,
                lenient=args.lenient, timeout=args.timeout, build_dir=args.build_dir,
                baseline=args.baseline, plots=args.plots, argv=argv), console)
        if args.command == "sites":
            return cmd_sites(args, command, console)
        if args.command == "paging":
            return run_paging(PagingOptions(
                command=command, allocators=args.allocators, sizes=args.sizes,
                drag=args.drag, output=args.output, timeout=args.timeout, plots=args.plots,
                build_dir=args.build_dir, argv=argv), console)
        if args.command == "pressure":
            return run_pressure(PressureOptions(
                command=command, allocators=args.allocators, limits=args.limits,
                timeout=args.timeout, build_dir=args.build_dir), console)
        if args.command == "reproduce" and not command:
            return run_reproduce(ReproduceOptions(
                output=args.output, quick=args.quick, only=args.only,
                build_dir=args.build_dir, timeout=args.timeout, argv=argv), console)
        if command and args.command != "trace":
            raise LabError(f"`locus {args.command}` takes no command after --")
        if args.command == "trace":
            return trace.cmd_trace(args, command, console)
        if args.command == "trace stats":
            return trace.cmd_trace_stats(args, console)
        if args.command == "report":
            return run_report(args.folder, console, plots=args.plots)
        if args.command == "list":
            return cmd_list(args, console)
        parser.print_help()
        return 2
    except LabError as e:
        sys.stderr.write(f"locus: error: {e}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("locus: interrupted\n")
        return 130


# ---- locus list -----------------------------------------------------------------------------------

def cmd_list(args, console: Console) -> int:
    paths = find_paths(args.build_dir)
    disc = alloc_mod.discover(paths)
    t = Table(title="Allocators", title_justify="left",
              caption="default: compared without --allocators (`-a all` for every one)",
              caption_justify="left")
    for col in ("name", "kind", "default", "library", "version"):
        t.add_column(col)
    default = {a.name for a in alloc_mod.default_choice(disc)}
    for a in disc.allocators:
        t.add_row(a.name + (f" ({', '.join(a.aliases)})" if a.aliases else ""), a.kind,
                  "yes" if a.name in default else "", a.library or "(none: the C library)",
                  a.version)
    console.print(t)
    if disc.missing_peers:
        console.print(f"[yellow]{alloc_mod.missing_message(disc.missing_peers)}[/yellow]")
    for peer in alloc_mod.PEERS:
        if peer.optional and peer.name not in {a.name for a in disc.allocators}:
            console.print(f"{peer.name}: not installed (apt-get install {peer.package})")
    folders = ", ".join(str(f) for f, _ in alloc_mod.user_folders())
    console.print(f"your own allocators: searched {folders} ({alloc_mod.PEERS_ENV}=DIR[:DIR] "
                  "adds folders; docs/lab.md)")
    for note in disc.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    for title, find in (("Default suite", suite.default_suite),
                        (f"The {suite.LF_SUITE} suite (--suite {suite.LF_SUITE})",
                         suite.lf_suite)):
        workloads, warnings = find(paths, quick=False)
        w = Table(title=title, title_justify="left")
        for col in ("workload", "kind", "what"):
            w.add_column(col)
        for wl in workloads:
            w.add_row(wl.name, wl.kind, wl.description)
        console.print(w)
        for note in warnings:
            console.print(f"[yellow]note:[/yellow] {note}")
    perf_ok, perf_note = runner.perf_status()
    console.print(f"cachegrind: {'valgrind found' if runner.valgrind_available() else 'valgrind not installed'}; "
                  f"hardware counters: {'perf stat' if perf_ok else perf_note}")
    built = paths.tools / "liblocus_tracer.so"
    console.print(f"tracer: {built if built.exists() else 'built on first use from lab/tracer/locus_tracer.c'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
