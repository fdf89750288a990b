"""`locus compare`: a program (or the default suite) under every chosen allocator.

Order of work: (1) with --frag, one traced run per workload (tracer in summary mode, glibc
underneath) for the peak live bytes the program requests; (2) the timed runs, repetitions
interleaved: in repetition r every allocator runs workload w back to back, in an order
rotated by r, so slow drifts of the machine spread over all allocators; (3) with --cache, one
cachegrind run (and one `perf stat` run where hardware counters exist) per allocator and
workload. Every run is appended to runs.jsonl as it finishes.
"""
from __future__ import annotations

import json
import os
import platform
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console
from rich.progress import (BarColumn, Progress, TaskProgressColumn, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)

from . import allocators as alloc_mod
from . import hints, regions, report, results, runner, suite, trace
from .common import LabError, find_paths, human_bytes

CACHEGRIND_SLOWDOWN = 60    # cachegrind runs a program about this many times slower
TRACE_SLOWDOWN = 3
DEFAULT_BUDGET_MIN = 14     # the default suite with default repetitions stops adding
                            # repetitions when the next one would end past this


@dataclass
class CompareOptions:
    allocators: str | None = None
    workloads: str | None = None
    repetitions: int | None = None
    quick: bool = False
    output: str | None = None
    cache: bool = False
    frag: bool = True
    timeout: float = 600.0
    build_dir: str | None = None
    baseline: str | None = None
    plots: bool = True
    budget_min: float | None = None             # None: 14 min for the default suite
    suite: str | None = None                    # None/"default", "regions", "hints", "lf"
    command: list = field(default_factory=list)
    name: str | None = None
    argv: list = field(default_factory=list)     # the lab's own command line, for the report


def machine_info() -> dict:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
            "libc": " ".join(platform.libc_ver()), "python": platform.python_version(),
            "hostname": platform.node()}


def _base_environment() -> tuple[dict, list]:
    env = dict(os.environ)
    notes = []
    for key in ("LD_PRELOAD", "LOCUS_TRACE_FILE", "LOCUS_TRACE_MODE"):
        if env.pop(key, None) is not None and key == "LD_PRELOAD":
            notes.append("LD_PRELOAD from your environment was dropped: it would replace "
                         "the allocator under test")
    return env, notes


def _rotate(items: list, k: int) -> list:
    if not items:
        return items
    k %= len(items)
    return items[k:] + items[:k]


def _choose_allocators(opts, paths) -> tuple[list, alloc_mod.Discovery, list]:
    disc = alloc_mod.discover(paths)
    chosen = alloc_mod.select(disc, opts.allocators)
    notes = list(disc.notes)
    usable = []
    for a in chosen:
        problem = alloc_mod.check_preload(a)
        if problem is None:
            usable.append(a)
        elif opts.allocators:
            raise LabError(f"allocator {a.name} cannot be preloaded: {problem}")
        else:
            notes.append(f"{a.name} skipped: cannot be preloaded ({problem})")
    if disc.missing_peers:
        notes.append(alloc_mod.missing_message(disc.missing_peers))
    baseline = opts.baseline or alloc_mod.BASELINE
    names = [a.name for a in usable]
    if baseline not in names:
        if opts.baseline:
            raise LabError(f"baseline {baseline} is not among the allocators: {', '.join(names)}")
        baseline = names[0]
        notes.append(f"{alloc_mod.BASELINE} not selected: results are normalised to {baseline}")
    usable.sort(key=lambda a: a.name != baseline)  # the baseline first
    return usable, disc, notes


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


def _fmt_duration(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    return f"{s / 60:.0f} min" if s < 5400 else f"{s / 3600:.1f} h"


def _default_output() -> Path:
    return Path("locus-results") / datetime.now().strftime("%Y%m%d-%H%M%S")


def _meta_head(opts: CompareOptions, paths, reps: int) -> dict:
    """What every results folder's meta.json starts with."""
    return {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": "locus " + " ".join(shlex.quote(a) for a in opts.argv),
        "machine": machine_info(),
        "repository": str(paths.root),
        "repetitions": reps,
        "quick": opts.quick,
    }


def _repetitions(opts: CompareOptions) -> int:
    reps = opts.repetitions if opts.repetitions is not None else (1 if opts.quick else 3)
    if reps < 1:
        raise LabError("--repetitions must be at least 1")
    return reps


def _output_folder(opts: CompareOptions) -> Path:
    out = Path(opts.output) if opts.output else _default_output()
    if out.exists() and not out.is_dir():
        raise LabError(f"--output {out} is a file, not a folder")
    return out


def run_compare(opts: CompareOptions, console: Console) -> int:
    if opts.suite == regions.SUITE:
        return run_regions(opts, console)
    if opts.suite == hints.SUITE:
        return run_hints(opts, console)
    if opts.suite not in (None, "default", suite.LF_SUITE):
        raise LabError(f"unknown suite '{opts.suite}'; available: default, {regions.SUITE}, "
                       f"{hints.SUITE}, {suite.LF_SUITE}")
    paths = find_paths(opts.build_dir)
    workloads, warnings = _choose_workloads(opts, paths)
    if opts.suite == suite.LF_SUITE:
        # glibc, liblocus.so, the Locus libraries of the pow2 and lf designs (as soon as
        # they are built) and the peers; or the ones named
        allocs, notes = _region_allocators(opts, paths, suite.LF_DESIGNS, "the lf suite")
        disc = alloc_mod.discover(paths)
    else:
        allocs, disc, notes = _choose_allocators(opts, paths)
    baseline = allocs[0].name
    reps = _repetitions(opts)
    tracer = trace.tracer_library(paths) if opts.frag else None
    perf_ok, perf_note = runner.perf_status() if opts.cache else (False, "")
    if opts.cache and not runner.valgrind_available():
        raise LabError("--cache needs valgrind (apt-get install valgrind)")
    out = _output_folder(opts)

    for w in warnings + notes:
        console.print(f"[yellow]note:[/yellow] {w}")
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
                  f"{_fmt_duration(estimate)} (baseline {baseline})")
    if budget_s:
        console.print(f"  time budget: {_fmt_duration(budget_s)} (fewer repetitions if the "
                      "machine is slower; --budget 0 for none)")
    console.print("  allocators: " + ", ".join(a.name for a in allocs))
    console.print("  workloads:  " + ", ".join(w.name for w in workloads))

    base_env, env_notes = _base_environment()
    meta = {
        **_meta_head(opts, paths, reps),
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
    try:
        writer = results.ResultsWriter(out, meta)
    except OSError as e:
        raise LabError(f"cannot write to {out}: {e.strerror or e}") from None
    scratch = Path(tempfile.mkdtemp(prefix="locus-compare-"))
    runs: list = []

    def record(entry: dict):
        runs.append(entry)
        writer.add(entry)

    def env_for(w, a):
        return a.environment({**base_env, **w.env})

    started = time.monotonic()
    try:
        with _progress(console) as progress:
            task = progress.add_task("starting", total=estimate)
            step = _stepper(console, progress, task, started)

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
                            f"time budget of {_fmt_duration(budget_s)} (--budget, -r)")
                    progress.console.print(f"[yellow]note:[/yellow] {note}")
                    meta["notes"].append(note)
                    meta["repetitions"] = rep
                    writer.write_meta()
                    progress.update(task, total=progress.tasks[0].completed + cache_left)
                    break
                for wi, w in enumerate(workloads):
                    for a in _rotate(allocs, rep + wi):
                        label = f"rep {rep + 1}/{reps} {w.name} / {a.name}"
                        res = step(label, w.nominal_s,
                                   lambda w=w, a=a: runner.run_once(
                                       w.argv, env_for(w, a), w.cwd, opts.timeout))
                        record({"kind": "time", "workload": w.name, "allocator": a.name,
                                "rep": rep, **res.to_json()})
                        if not res.ok:
                            progress.console.print(
                                f"[red]{w.name} under {a.name}: {res.status}[/red]"
                                + (f" ({res.stderr_tail.splitlines()[-1][:120]})"
                                   if res.stderr_tail else ""))

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
        return _interrupted(console, out)
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
    console.print(f"\nwrote {out}/: " + ", ".join(files)
                  + f" (raw: {results.RUNS_FILE}, {results.META_FILE}); took "
                  f"{_fmt_duration(time.monotonic() - started)}")
    return 0


def _interleaved(configs: list, workloads: list, reps: int):
    """(repetition, workload, config) in run order: each repetition runs a workload's
    configurations back to back, in an order rotated by the repetition and the workload."""
    for rep in range(reps):
        for wi, w in enumerate(workloads):
            for c in _rotate([c for c in configs if c.workload == w], rep + wi):
                yield rep, w, c


def _program_run(step, module, kind: str, c, rep: int, reps: int, cmd: list, env: dict,
                 nominal: float, timeout: float) -> dict:
    """One timed run of a suite's own program (regions, hints): the runner's record, the
    program's output parsed by the suite module, and the module's status."""
    res = step(f"rep {rep + 1}/{reps} {c.workload} {c.label}", nominal,
               lambda: runner.run_once(cmd, env, None, timeout, capture_stdout=True))
    data = res.to_json()
    parsed = module.parse_output(data.pop("stdout", ""))
    # A program may report its own VmHWM at exit: a run of a few milliseconds can end before
    # the sampler sees it (then the sampled peak is 0).
    hwm = parsed.pop("vmhwm_kib", None)
    if isinstance(hwm, int) and hwm > data["maxrss_kib"]:
        data["maxrss_kib"] = hwm
    return {"kind": kind, **asdict(c), "rep": rep, **data, **parsed,
            "status": module.run_status(data, parsed)}


def _interrupted(console: Console, out: Path) -> int:
    console.print(f"[yellow]interrupted: the runs so far are in {out}; "
                  f"`locus report {out}` draws them[/yellow]")
    return 130


def _progress(console: Console) -> Progress:
    """The progress bar of a comparison (on a terminal only)."""
    return Progress(TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(),
                    TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                    console=console, transient=True, disable=not console.is_terminal,
                    speed_estimate_period=900)  # eta from the average speed


def _stepper(console: Console, progress: Progress, task, started: float):
    """step(label, nominal seconds, fn): runs fn() as one step of the progress bar; off a
    terminal, prints one line per step instead."""
    def step(label: str, nominal: float, fn):
        progress.update(task, description=label)
        res = fn()
        progress.advance(task, nominal)
        if not console.is_terminal:
            console.print(f"[{_fmt_duration(time.monotonic() - started):>6}] {label}: "
                          f"{_brief(res)}")
        return res
    return step


def _brief(res) -> str:
    if isinstance(res, runner.RunResult):
        return (f"{res.status}, {res.wall_s:.2f} s, peak RSS "
                f"{human_bytes(res.maxrss_kib * 1024)}")
    if isinstance(res, dict):
        if res.get("instructions") is not None:
            return f"{res['status']}, {res['instructions']:,} instructions"
        return str(res.get("status"))
    return str(res)


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


# ---- the regions suite (regions.py) --------------------------------------------------------------

def _region_allocators(opts: CompareOptions, paths, designs: tuple = (),
                       what: str = "Locus regions") -> tuple[list, list]:
    """glibc always (the baseline, and bump and the peers' arenas run under it); then the
    allocators named, or by default liblocus.so, the Locus libraries of the given designs and
    the peers."""
    if opts.allocators:
        spec = opts.allocators if opts.allocators.strip() == "all" else \
            ",".join([alloc_mod.BASELINE, opts.allocators])
        notes = []
    else:
        disc = alloc_mod.discover(paths)
        names = [a.name for a in disc.allocators
                 if a.kind != "locus" or Path(a.library).name == "liblocus.so"
                 or a.design in designs or a.name.removeprefix("locus-") in designs]
        spec = ",".join(names)
        others = f" and the {'/'.join(designs)} designs" if designs else ""
        notes = [f"{what} under liblocus.so{others} only: --allocators all (or a list) for "
                 "the other Locus libraries"] if len(names) < len(disc.allocators) else []
    picked = CompareOptions(allocators=spec, baseline=opts.baseline or alloc_mod.BASELINE)
    allocs, _, more = _choose_allocators(picked, paths)
    return allocs, notes + more


def _suite_program(opts: CompareOptions, module) -> tuple:
    """The chosen workloads, the paths and the program of a suite with its own program
    (regions, hints)."""
    if opts.command:
        raise LabError(f"--suite {module.SUITE} runs its own programs: no command after --")
    workloads = module.select_workloads(opts.workloads)
    paths = find_paths(opts.build_dir)
    program = paths.bench / module.PROGRAM
    if not program.is_file():
        raise LabError(f"{program} is not built (run `make`)")
    return workloads, paths, program


def run_regions(opts: CompareOptions, console: Console) -> int:
    """`locus compare --suite regions`: each region workload in each mode under the allocators
    the mode runs under (regions.plan), repetitions interleaved."""
    if opts.cache:
        raise LabError("--cache is not available with --suite regions")
    workloads, paths, program = _suite_program(opts, regions)
    allocs, notes = _region_allocators(opts, paths)
    modes, mode_notes = regions.peer_modes()
    configs = regions.plan(allocs, workloads, modes)
    reps = _repetitions(opts)
    out = _output_folder(opts)
    nominal = regions.NOMINAL_S / (20 if opts.quick else 1)
    estimate = nominal * len(configs) * reps
    for note in notes + mode_notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    console.print(f"[bold]locus compare --suite regions[/bold]: {len(configs)} "
                  f"configurations x {reps} repetition(s); estimated "
                  f"{_fmt_duration(estimate)}")
    console.print("  allocators: " + ", ".join(a.name for a in allocs))
    console.print("  workloads:  " + ", ".join(workloads) + "; modes: "
                  + ", ".join(m for m in regions.MODES if any(c.mode == m for c in configs)))

    base_env, env_notes = _base_environment()
    meta = {**_meta_head(opts, paths, reps), "suite": regions.SUITE,
            "baseline": alloc_mod.BASELINE,
            "allocators": [a.to_json() for a in allocs],
            "workloads": [{"name": w, "description": regions.WORKLOADS[w]} for w in workloads],
            "configs": [asdict(c) for c in configs],
            "notes": notes + mode_notes + env_notes}
    try:
        writer = results.ResultsWriter(out, meta)
    except OSError as e:
        raise LabError(f"cannot write to {out}: {e.strerror or e}") from None
    profiles = out / regions.PROFILES
    shutil.rmtree(profiles, ignore_errors=True)
    profiles.mkdir()
    by_name = {a.name: a for a in allocs}
    runs: list = []
    started = time.monotonic()
    try:
        with _progress(console) as progress:
            task = progress.add_task("starting", total=estimate)
            step = _stepper(console, progress, task, started)
            for rep, w, c in _interleaved(configs, workloads, reps):
                argv = regions.argv(program, c, opts.quick,
                                    profiles / f"{c.stem}.csv" if rep == 0 else None)
                entry = _program_run(step, regions, "region", c, rep, reps, argv,
                                     by_name[c.allocator].environment(base_env), nominal,
                                     opts.timeout)
                runs.append(entry)
                writer.add(entry)
                tail = entry.get("stderr_tail") or ""
                if entry["status"] not in ("ok", regions.UNAVAILABLE):
                    progress.console.print(
                        f"[red]{w} {c.label}: {entry['status']}[/red]"
                        + (f" ({tail.splitlines()[-1][:120]})" if tail else ""))
    except KeyboardInterrupt:
        return _interrupted(console, out)
    finally:
        writer.close()
    files = _region_report(out, meta, runs, console, opts.plots)
    return _written(console, out, files, started, f", {regions.PROFILES}/")


def _written(console: Console, out: Path, files: list, started: float, raw: str = "") -> int:
    console.print(f"\nwrote {out}/: " + ", ".join(files)
                  + f" (raw: {results.RUNS_FILE}, {results.META_FILE}{raw}); "
                  f"took {_fmt_duration(time.monotonic() - started)}")
    return 0


def _region_report(folder: Path, meta: dict, runs: list, console: Console, plots: bool) -> list:
    summary = regions.summarise(meta, runs)
    regions.print_summary(console, summary, meta)
    rows = regions.rows(summary)
    try:
        report.write_csv(folder / "runs.csv", runs)
        report.write_csv(folder / "summary.csv", rows)
        (folder / "summary.json").write_text(json.dumps(
            {"suite": regions.SUITE, "flagship": summary["flagship"], "results": rows,
             "checks": summary["checks"]}, indent=2) + "\n")
        written = regions.plot_all(folder, summary) if plots else []
        regions.write_markdown(folder, summary, meta, written)
    except OSError as e:
        raise LabError(f"cannot write the report into {folder}: {e.strerror or e}") from None
    return ["report.md", "summary.csv", "summary.json", "runs.csv", *written]


# ---- the hints suite (hints.py) ------------------------------------------------------------------

def run_hints(opts: CompareOptions, console: Console) -> int:
    """`locus compare --suite hints`: each hint workload under each allocator, without and
    with hints, repetitions interleaved; then one cachegrind run per configuration on a
    reduced size."""
    workloads, paths, program = _suite_program(opts, hints)
    allocs, notes = _region_allocators(opts, paths, hints.DESIGNS_WITH_HINTS,
                                       "Locus libraries")
    configs = hints.plan(allocs, workloads)
    reps = _repetitions(opts)
    out = _output_folder(opts)
    cache = runner.valgrind_available()
    if not cache:
        notes.append("cachegrind skipped: valgrind is not installed (apt-get install "
                     "valgrind): no instruction or miss counts")
    nominal = hints.NOMINAL_S / (20 if opts.quick else 1)
    cache_nominal = hints.CACHE_NOMINAL_S / (5 if opts.quick else 1)
    estimate = (nominal * reps + (cache_nominal if cache else 0)) * len(configs)
    for note in notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    console.print(f"[bold]locus compare --suite hints[/bold]: {len(configs)} "
                  f"configurations x {reps} repetition(s){' + cachegrind' if cache else ''}; "
                  f"estimated {_fmt_duration(estimate)}")
    console.print("  allocators: " + ", ".join(a.name for a in allocs))
    console.print("  workloads:  " + ", ".join(workloads))

    base_env, env_notes = _base_environment()
    meta = {**_meta_head(opts, paths, reps), "suite": hints.SUITE,
            "baseline": alloc_mod.BASELINE, "cache": cache,
            "allocators": [a.to_json() for a in allocs],
            "workloads": [{"name": w, "description": hints.WORKLOADS[w]} for w in workloads],
            "configs": [asdict(c) for c in configs],
            "notes": notes + env_notes}
    try:
        writer = results.ResultsWriter(out, meta)
    except OSError as e:
        raise LabError(f"cannot write to {out}: {e.strerror or e}") from None
    by_name = {a.name: a for a in allocs}
    runs: list = []

    def record(entry: dict, label: str):
        runs.append(entry)
        writer.add(entry)
        if entry["status"] != "ok":
            tail = entry.get("stderr_tail") or ""
            progress.console.print(f"[red]{label}: {entry['status']}[/red]"
                                   + (f" ({tail.splitlines()[-1][:120]})" if tail else ""))

    started = time.monotonic()
    try:
        with _progress(console) as progress:
            task = progress.add_task("starting", total=estimate)
            step = _stepper(console, progress, task, started)
            for rep, w, c in _interleaved(configs, workloads, reps):
                record(_program_run(step, hints, "hint", c, rep, reps,
                                    hints.argv(program, c, opts.quick),
                                    by_name[c.allocator].environment(base_env), nominal,
                                    opts.timeout), f"{w} {c.label}")
            for c in configs if cache else []:
                cmd = hints.argv(program, c, opts.quick, cache=True)
                env = by_name[c.allocator].environment(base_env)
                res = step(f"cachegrind {c.workload} {c.label}", cache_nominal,
                           lambda cmd=cmd, env=env: runner.run_cachegrind(
                               cmd, env, None, opts.timeout * CACHEGRIND_SLOWDOWN))
                record({"kind": "hint-cache", **asdict(c), **res},
                       f"cachegrind {c.workload} {c.label}")
    except KeyboardInterrupt:
        return _interrupted(console, out)
    finally:
        writer.close()
    files = _hints_report(out, meta, runs, console, opts.plots)
    return _written(console, out, files, started)


def _hints_report(folder: Path, meta: dict, runs: list, console: Console, plots: bool) -> list:
    summary = hints.summarise(meta, runs)
    hints.print_summary(console, summary, meta)
    rows = hints.rows(summary)
    accuracy = hints.accuracy_rows(summary)
    try:
        report.write_csv(folder / "runs.csv", runs)
        report.write_csv(folder / "summary.csv", rows)
        report.write_csv(folder / "accuracy.csv", accuracy)
        (folder / "summary.json").write_text(json.dumps(
            {"suite": hints.SUITE, "baseline": summary["baseline"], "results": rows,
             "accuracy": accuracy}, indent=2) + "\n")
        written = hints.plot_all(folder, summary) if plots else []
        hints.write_markdown(folder, summary, meta, written)
    except OSError as e:
        raise LabError(f"cannot write the report into {folder}: {e.strerror or e}") from None
    return ["report.md", "summary.csv", "accuracy.csv", "summary.json", "runs.csv", *written]


def run_report(folder: str, console: Console, plots: bool = True) -> int:
    meta, runs = results.load(folder)
    if meta.get("suite") in (regions.SUITE, hints.SUITE):
        draw = _region_report if meta["suite"] == regions.SUITE else _hints_report
        files = draw(Path(folder), meta, runs, console, plots)
        console.print(f"\nwrote {folder}/: " + ", ".join(files))
        return 0
    if meta.get("suite") == "replay":
        from . import replay  # replay builds on this module
        files = replay.draw(Path(folder), meta, runs, console, plots)
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
