"""`locus compare`: a program (or the default or lf suite) under every chosen allocator; and
`locus report`, re-drawing a results folder. The regions and hints suites run in their own
modules (regions.run_regions, hints.run_hints); what every command shares is in session.py.

Order of work: (1) with --frag, one traced run per workload (tracer in summary mode, glibc
underneath) for the peak live bytes the program requests; (2) the timed runs, repetitions
interleaved: in repetition r every allocator runs workload w back to back, in an order
rotated by r, so slow drifts of the machine spread over all allocators; (3) with --cache, one
cachegrind run (and one `perf stat` run where hardware counters exist) per allocator and
workload. Every run is appended to runs.jsonl as it finishes.
"""
from __future__ import annotations

import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from . import allocators as alloc_mod
from . import (hints, regions, replay, report, reproduce, results, runner, session, suite,
               trace)
from .common import LabError, find_paths
from .runner import CACHEGRIND_SLOWDOWN
from .session import format_duration

TRACE_SLOWDOWN = 3
DEFAULT_BUDGET_MIN = 14     # the default suite with default repetitions stops adding
                            # repetitions when the next one would end past this


@dataclass
class CompareOptions(session.RunOptions):
    """`locus compare`'s options (the regions and hints suites read them too)."""
    workloads: str | None = None
    cache: bool = False
    frag: bool = True
    budget_min: float | None = None             # None: 14 min for the default suite
    suite: str | None = None                    # None/"default", "regions", "hints", "lf"
    command: list = field(default_factory=list)
    name: str | None = None


def _choose_workloads(opts, paths) -> tuple[list, list]:
    if opts.command:
        if opts.suite == suite.LF_SUITE:
            raise LabError(f"--suite {suite.LF_SUITE} runs its own programs: no command "
                           "after --")
        if opts.workloads:
            raise LabError("--workloads selects from the default suite; it cannot be used "
                           "with a command")
        w = suite.command_workload(opts.command, opts.name)
        notes = []
        if suite.is_static_elf(w.argv[0]):
            notes.append(f"{w.argv[0]} is statically linked: LD_PRELOAD cannot change its "
                         "allocator, so every allocator will measure the same")
        return [w], notes
    if opts.suite == suite.LF_SUITE:
        workloads, warnings = suite.lf_suite(paths, opts.quick)
        workloads = suite.select_workloads(workloads, opts.workloads, "lf ")
    else:
        workloads, warnings = suite.default_suite(paths, opts.quick)
        workloads = suite.select_workloads(workloads, opts.workloads)
    if not workloads:
        raise LabError("no workload available: build the bench programs with `make` or give "
                       "a command after --")
    return workloads, warnings


def _estimate(workloads, allocs, reps, opts) -> float:
    per_round = sum(w.nominal_s for w in workloads)
    total = per_round * len(allocs) * reps
    if opts.frag:
        total += per_round * TRACE_SLOWDOWN
    if opts.cache:
        total += per_round * len(allocs) * CACHEGRIND_SLOWDOWN
    return total


def run_compare(opts: CompareOptions, console: Console) -> int:
    if opts.suite == regions.SUITE:
        return regions.run_regions(opts, console)
    if opts.suite == hints.SUITE:
        return hints.run_hints(opts, console)
    if opts.suite not in (None, "default", suite.LF_SUITE):
        raise LabError(f"unknown suite '{opts.suite}'; available: default, {regions.SUITE}, "
                       f"{hints.SUITE}, {suite.LF_SUITE}")
    paths = find_paths(opts.build_dir)
    workloads, warnings = _choose_workloads(opts, paths)
    if opts.suite == suite.LF_SUITE:
        # glibc, liblocus.so, the Locus libraries of the pow2 and lf designs (as soon as
        # they are built) and the peers; or the ones named
        allocs, notes = session.suite_allocators(paths, opts.allocators, opts.baseline,
                                                 suite.LF_DESIGNS, "the lf suite")
        disc = alloc_mod.discover(paths)
    else:
        allocs, disc, notes = session.choose_allocators(paths, opts.allocators, opts.baseline)
    baseline = allocs[0].name
    reps = session.repetitions(opts)
    tracer = trace.tracer_library(paths) if opts.frag else None
    perf_ok, perf_note = runner.perf_status() if opts.cache else (False, "")
    if opts.cache and not runner.valgrind_available():
        raise LabError("--cache needs valgrind (apt-get install valgrind)")
    out = session.output_folder(opts)

    session.print_notes(console, warnings + notes)
    if opts.cache:
        console.print(f"[yellow]note:[/yellow] hardware counters: "
                      f"{'perf stat' if perf_ok else perf_note}")
    budget = opts.budget_min
    if budget is None:
        budget = DEFAULT_BUDGET_MIN if not opts.command and opts.repetitions is None else 0
    budget_s = budget * 60
    estimate = _estimate(workloads, allocs, reps, opts)
    console.print(f"[bold]locus compare[/bold]: {len(workloads)} workload(s) x "
                  f"{len(allocs)} allocator(s) x {reps} repetition(s) = "
                  f"{len(workloads) * len(allocs) * reps} timed runs"
                  f"{' + cachegrind' if opts.cache else ''}; estimated "
                  f"{format_duration(estimate)} (baseline {baseline})")
    if budget_s:
        console.print(f"  time budget: {format_duration(budget_s)} (fewer repetitions if the "
                      "machine is slower; --budget 0 for none)")
    console.print("  allocators: " + ", ".join(a.name for a in allocs))
    console.print("  workloads:  " + ", ".join(w.name for w in workloads))

    base_env, env_notes = session.base_environment()
    meta = {
        **session.meta_head(opts, paths, reps),
        **({"suite": suite.LF_SUITE} if opts.suite == suite.LF_SUITE else {}),
        "baseline": baseline,
        "frag": opts.frag,
        "cache": opts.cache,
        "hardware_counters": perf_note if opts.cache else "not requested",
        "allocators": [a.to_json() for a in allocs],
        "missing_peers": [p.name for p in disc.missing_peers],
        "workloads": [w.to_json() for w in workloads],
        "notes": warnings + notes + env_notes,
    }
    created = out  # the outermost folder this run creates, removed again if nothing ran
    while not created.parent.exists():
        created = created.parent
    created = None if out.exists() else created
    writer = session.open_results(out, meta)
    scratch = Path(tempfile.mkdtemp(prefix="locus-compare-"))
    runs: list = []

    def record(entry: dict):
        runs.append(entry)
        writer.add(entry)

    def env_for(w, a):
        return a.environment({**base_env, **w.env})

    started = time.monotonic()
    try:
        with session.progress_bar(console) as progress:
            task = progress.add_task("starting", total=estimate)
            step = session.stepper(console, progress, task, started)

            if opts.frag:
                for w in workloads:
                    step(f"tracing {w.name}", w.nominal_s * TRACE_SLOWDOWN,
                         lambda w=w: _live_run(w, base_env, tracer, scratch, opts, record))

            timed_start = time.monotonic()
            for rep in range(reps):
                elapsed = time.monotonic() - started
                per_rep = (time.monotonic() - timed_start) / rep if rep else 0.0
                cache_left = (sum(w.nominal_s for w in workloads) * len(allocs)
                              * CACHEGRIND_SLOWDOWN if opts.cache else 0.0)
                if rep and budget_s and elapsed + per_rep + cache_left > budget_s:
                    note = (f"stopped after {rep} of {reps} repetitions to stay within the "
                            f"time budget of {format_duration(budget_s)} (--budget, -r)")
                    progress.console.print(f"[yellow]note:[/yellow] {note}")
                    meta["notes"].append(note)
                    meta["repetitions"] = rep
                    writer.write_meta()
                    progress.update(task, total=progress.tasks[0].completed + cache_left)
                    break
                for wi, w in enumerate(workloads):
                    for a in session.rotate(allocs, rep + wi):
                        label = f"rep {rep + 1}/{reps} {w.name} / {a.name}"
                        res = step(label, w.nominal_s,
                                   lambda w=w, a=a: runner.run_once(
                                       w.argv, env_for(w, a), w.cwd, opts.timeout))
                        record({"kind": "time", "workload": w.name, "allocator": a.name,
                                "rep": rep, **res.to_json()})
                        if not res.ok:
                            progress.console.print(session.failure_line(
                                f"{w.name} under {a.name}", res.status, res.stderr_tail))

            if opts.cache:
                for w in workloads:
                    for a in allocs:
                        res = step(f"cachegrind {w.name} / {a.name}",
                                   w.nominal_s * CACHEGRIND_SLOWDOWN,
                                   lambda w=w, a=a: runner.run_cachegrind(
                                       w.argv, env_for(w, a), w.cwd,
                                       opts.timeout * CACHEGRIND_SLOWDOWN))
                        record({"kind": "cache", "workload": w.name, "allocator": a.name, **res})
                        if perf_ok:
                            res = runner.run_perf(w.argv, env_for(w, a), w.cwd, opts.timeout)
                            record({"kind": "perf", "workload": w.name, "allocator": a.name,
                                    **res})
    except KeyboardInterrupt:
        return session.interrupted(console, out)
    except LabError:
        if created and not runs:  # e.g. the program cannot start: leave nothing behind
            writer.close()
            shutil.rmtree(created, ignore_errors=True)
        raise
    finally:
        if not writer.closed:
            writer.write_meta()
            writer.close()
        shutil.rmtree(scratch, ignore_errors=True)

    summary = results.summarise(meta, runs)
    report.print_summary(console, summary, meta)
    files = report.write_all(out, summary, meta, results.rows(summary), runs, plots=opts.plots)
    return session.print_written(console, out, files, started)


def _live_run(w, base_env, tracer, scratch: Path, opts, record) -> str:
    """Peak live bytes requested by the workload: one run under the tracer in summary mode,
    glibc underneath. For several processes, the largest one counts."""
    out = scratch / f"{w.name}.live"
    trace.clear_trace_files(out)
    env = trace.trace_environment({**base_env, **w.env}, tracer, out, summary=True)
    res = runner.run_once(w.argv, env, w.cwd, opts.timeout * TRACE_SLOWDOWN)
    summaries = []
    for f in trace.trace_files(out):
        try:
            summaries.append(trace.read_summary(f))
        except LabError:
            continue
    best = max(summaries, key=lambda s: s.get("peak_live_bytes", 0), default={})
    entry = {"kind": "live", "workload": w.name, "allocator": "tracer", "status": res.status,
             "wall_s": res.wall_s, "processes": len(summaries),
             "peak_live_bytes": best.get("peak_live_bytes"),
             "peak_live_objects": best.get("peak_live_objects"),
             "allocations": sum(s.get("allocations", 0) for s in summaries),
             "bytes_allocated": sum(s.get("bytes_allocated", 0) for s in summaries)}
    record(entry)
    trace.clear_trace_files(out)
    peak = entry["peak_live_bytes"]
    return f"peak live {peak:,} bytes" if peak else f"no trace ({res.status})"


def run_report(folder: str, console: Console, plots: bool = True) -> int:
    if (Path(folder) / reproduce.JSON_FILE).is_file():   # a `locus reproduce` folder
        files = reproduce.redraw(Path(folder), console)
        console.print(f"\nwrote {folder}/: " + ", ".join(files))
        return 0
    meta, runs = results.load(folder)
    # The suites and replay draw their own folders; the default and lf suites are drawn here.
    own_report = {regions.SUITE: regions.draw, hints.SUITE: hints.draw, replay.SUITE: replay.draw}
    draw = own_report.get(meta.get("suite"))
    if draw:
        files = draw(Path(folder), meta, runs, console, plots)
        console.print(f"\nwrote {folder}/: " + ", ".join(files))
        return 0
    summary = results.summarise(meta, runs)
    report.print_summary(console, summary, meta)
    files = report.write_all(Path(folder), summary, meta, results.rows(summary), runs,
                             plots=plots)
    console.print(f"\nwrote {folder}/: " + ", ".join(files))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use the `locus` command")
