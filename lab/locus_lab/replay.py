"""`locus replay`: one recorded allocation trace replayed under every allocator.

The replay is C (build/tools/locus_replay, lab/replay/locus_replay.c): it reads the trace,
resolves objects, realloc chains and cross-thread frees once, then replays the calls with one
thread per traced thread and prints what it measured on one line. This module checks the
trace (the driver's --check, under glibc: a trace that cannot be replayed is one line naming
its record), runs the driver under each allocator with repetitions interleaved, and writes a
results folder in `locus compare`'s format, so that results.summarise, the tables, CSV, JSON,
plots and `locus report` are compare's own:

  workload     one per trace (its file name without .trace)
  "live"       the trace's peak live bytes requested, computed by the driver in event order
  "time"       one replay: wall_s is the replay phase as the driver timed it (the process's
               own wall time, loading included, is process_wall_s); maxrss_kib is the
               resident memory the replay added above the driver's baseline (its own tables),
               so the fragmentation ratio is the heap the allocator held / the live bytes
  "cache"      with --instructions: callgrind counting only inside the allocator's calls
               (--toggle-collect=replay_call), with the same simulated caches as cachegrind

The heap profile (seed 004 Fig. 5) comes from the first repetition: the driver samples the
live bytes requested and its resident memory above the baseline about 1000 times over the
replay (profiles/<trace>__<allocator>.csv), drawn per trace with one held curve per allocator.
"""
from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from . import report, results, runner, session
from .common import REPLAY_SOURCE, LabError, Paths, built_or_compiled, find_paths, human_bytes
from .plots import draw_profiles, read_profile
from .regions import PROFILES

SUITE = "replay"
CALLGRIND_SLOWDOWN = 40     # callgrind with cache simulation, relative to a replay run
PROFILE_PNG = "heap_profile.png"


@dataclass
class ReplayOptions(session.RunOptions):
    """`locus replay`'s options: the traces (their process's files), and how to replay them."""
    traces: list = field(default_factory=list)
    instructions: bool = False
    ordered: bool = False
    lenient: bool = False


def driver(paths: Paths) -> Path:
    return built_or_compiled(paths.tools / "locus_replay", REPLAY_SOURCE, "replay driver",
                             ["-O2", "-g", "-std=gnu11", "-pthread", "-Wall"])


def parse_output(text: str) -> dict:
    """The driver's `replay: key=value ...` line as numbers."""
    out = {}
    for line in text.splitlines():
        if not line.startswith("replay:"):
            continue
        for item in line.split()[1:]:
            key, _, value = item.partition("=")
            try:
                out[key] = int(value)
            except ValueError:
                try:
                    out[key] = float(value)
                except ValueError:
                    out[key] = value
    return out


def driver_message(stderr: str) -> str:
    """The driver's one-line complaint, without its program-name prefix."""
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else "the replay driver failed"
    return last.removeprefix("locus-replay: ")


def check_trace(program: Path, path: Path, lenient: bool, env: dict) -> dict:
    """The driver's preparation alone (under glibc): the trace's figures, or a LabError
    naming the record that cannot be replayed."""
    cmd = [str(program), "--check", *(["--lenient"] if lenient else []), str(path)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    except (OSError, subprocess.SubprocessError) as e:
        raise LabError(f"cannot run the replay driver: {e}") from None
    if r.returncode != 0:
        raise LabError(driver_message(r.stderr))
    return parse_output(r.stdout)


def workload_names(traces: list) -> list:
    """A table name per trace: its file name without .trace (gcc.trace.4282: gcc.4282),
    made unique."""
    names = []
    for t in traces:
        base = re.sub(r"\.trace(\.\d+)?$", r"\1", t.name) or t.name
        name, k = base, 2
        while name in names:
            name, k = f"{base}-{k}", k + 1
        names.append(name)
    return names


def driver_argv(program: Path, path: Path, opts: ReplayOptions, profile: Path | None) -> list:
    return [str(program), *(["--ordered"] if opts.ordered else []),
            *(["--lenient"] if opts.lenient else []),
            *(["--profile", str(profile)] if profile else []), str(path)]


def time_record(name: str, allocator: str, rep: int, res: runner.RunResult) -> dict:
    """A "time" record in compare's format from one driver run (see the module's note)."""
    data = res.to_json()
    parsed = parse_output(data.pop("stdout", ""))
    record = {"kind": "time", "workload": name, "allocator": allocator, "rep": rep, **data,
              "process_wall_s": res.wall_s, "process_maxrss_kib": res.maxrss_kib,
              "process_peak_anon_kib": res.peak_anon_kib, "replay": parsed}
    if res.ok and "replay_s" not in parsed:
        record["status"] = "no-output"
    record["wall_s"] = parsed.get("replay_s")
    record["maxrss_kib"] = parsed.get("held_peak_kib")
    record["peak_anon_kib"] = None
    return record


def run_callgrind(argv: list, env: dict, timeout: float) -> dict:
    """One run under callgrind counting only inside replay_call (the allocator's calls), with
    cachegrind's simulated caches; the result has cache_metrics' keys."""
    with tempfile.TemporaryDirectory(prefix="locus-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        cmd = ["valgrind", "--tool=callgrind", "--cache-sim=yes", *runner.CACHEGRIND_CACHES,
               "--collect-atstart=no", "--toggle-collect=replay_call",
               f"--callgrind-out-file={out}", *argv]
        res = runner.run_once(cmd, env, None, timeout)
        try:
            totals = runner.parse_cachegrind(out.read_text(errors="replace")
                                             .replace("\ntotals:", "\nsummary:"))
        except (OSError, ValueError):
            totals = {}
    totals.pop("_desc", None)
    status = res.status if totals or not res.ok else "no-output"
    return {"status": status, "wall_s": res.wall_s, **runner.cache_metrics(totals),
            "stderr_tail": res.stderr_tail[-500:]}


def run_replay(opts: ReplayOptions, console: Console) -> int:
    if not opts.traces:
        raise LabError("give a trace to replay: locus replay TRACE (record one with "
                       "locus trace -- COMMAND)")
    paths = find_paths(opts.build_dir)
    program = driver(paths)
    if opts.instructions and not runner.valgrind_available():
        raise LabError("--instructions needs valgrind (apt-get install valgrind)")
    base_env, env_notes = session.base_environment()
    traces = [Path(t) for t in opts.traces]
    for t in traces:
        if not t.is_file():
            raise LabError(f"no such trace: {t}")
    names = workload_names(traces)
    checked = {n: check_trace(program, t, opts.lenient, base_env) for n, t in zip(names, traces)}
    allocs, disc, notes = session.choose_allocators(paths, opts.allocators, opts.baseline)
    reps = session.repetitions(opts)
    out = session.output_folder(opts)
    for n, c in checked.items():
        skipped = [f"{c.get(k, 0):,} {what}" for k, what in (
            ("failed_skipped", "failed allocations"),
            ("unknown_releases_skipped", "releases of unknown blocks"),
            ("overwritten_live", "allocations of still-live blocks")) if c.get(k)]
        if skipped:
            notes.append(f"{n}: not replayed: " + ", ".join(skipped))
    session.print_notes(console, notes)

    # about 0.3 us per operation and 0.1 s to start and load, per run
    nominal = {n: 0.1 + 3e-7 * c.get("ops", 0) for n, c in checked.items()}
    estimate = sum(nominal.values()) * len(allocs) * (
        reps + (CALLGRIND_SLOWDOWN if opts.instructions else 0))
    console.print(f"[bold]locus replay[/bold]: {len(traces)} trace(s) x {len(allocs)} "
                  f"allocator(s) x {reps} repetition(s)"
                  f"{' + callgrind' if opts.instructions else ''}; estimated "
                  f"{session.format_duration(estimate)}")
    for n, c in checked.items():
        console.print(f"  {n}: {c.get('ops', 0):,} operations, {c.get('threads', 0)} "
                      f"thread(s), peak live {human_bytes(c.get('peak_live_bytes', 0))}")
    console.print("  allocators: " + ", ".join(a.name for a in allocs))

    meta = {**session.meta_head(opts, paths, reps), "suite": SUITE, "baseline": allocs[0].name,
            "frag": True, "cache": opts.instructions, "ordered": opts.ordered,
            "lenient": opts.lenient,
            "allocators": [a.to_json() for a in allocs],
            "missing_peers": [p.name for p in disc.missing_peers],
            "workloads": [{"name": n, "argv": driver_argv(program, t.resolve(), opts, None),
                           "kind": "replay", "trace": str(t.resolve()), "env": {},
                           "description": f"replay of {t.name}: {checked[n].get('ops', 0):,} "
                           f"operations, {checked[n].get('threads', 0)} thread(s)"}
                          for n, t in zip(names, traces)],
            "notes": notes + env_notes}
    try:
        writer = results.ResultsWriter(out, meta)
        (out / PROFILES).mkdir(exist_ok=True)
    except OSError as e:
        raise LabError(f"cannot write to {out}: {e.strerror or e}") from None
    runs: list = []

    def record(entry: dict):
        runs.append(entry)
        writer.add(entry)

    for n, c in checked.items():
        record({"kind": "live", "workload": n, "allocator": "trace", "status": "ok",
                "peak_live_bytes": c.get("peak_live_bytes"),
                "peak_live_objects": c.get("peak_live_objects"),
                "allocations": c.get("objects"), "bytes_allocated": c.get("bytes_allocated"),
                "operations": c.get("ops"), "threads": c.get("threads")})

    def run_all(step, progress):
        for rep in range(reps):
            for wi, (n, t) in enumerate(zip(names, traces)):
                for a in session.rotate(allocs, rep + wi):
                    profile = out / PROFILES / profile_name(n, a.name) if rep == 0 else None
                    argv = driver_argv(program, t, opts, profile)
                    res = step(f"rep {rep + 1}/{reps} {n} / {a.name}", nominal[n],
                               lambda argv=argv, a=a: runner.run_once(
                                   argv, a.environment(base_env), None, opts.timeout,
                                   capture_stdout=True))
                    entry = time_record(n, a.name, rep, res)
                    record(entry)
                    if entry["status"] != "ok":
                        progress.console.print(
                            f"[red]{n} under {a.name}: {entry['status']}[/red] "
                            f"({driver_message(res.stderr_tail)[:160]})")
        for n, t in zip(names, traces) if opts.instructions else ():
            for a in allocs:
                argv = driver_argv(program, t, opts, None)
                res = step(f"callgrind {n} / {a.name}", nominal[n] * CALLGRIND_SLOWDOWN,
                           lambda argv=argv, a=a: run_callgrind(
                               argv, a.environment(base_env),
                               opts.timeout * CALLGRIND_SLOWDOWN))
                record({"kind": "cache", "workload": n, "allocator": a.name, **res})

    return session.measure(console, out, writer, estimate, run_all,
                           lambda: draw(out, meta, runs, console, opts.plots), f", {PROFILES}/")


def profile_name(workload: str, allocator: str) -> str:
    return f"{workload}__{allocator}.csv"


# ---- the report -------------------------------------------------------------------------

def draw_heap_profiles(folder: Path, meta: dict) -> bool:
    allocs = [a["name"] for a in meta.get("allocators", [])]
    panels = [(w["name"], [(a, rows) for a in allocs
                           if (rows := read_profile(folder / PROFILES / profile_name(w["name"], a)))])
              for w in meta.get("workloads", [])]
    return draw_profiles(folder / PROFILE_PNG, panels, "live bytes requested (the trace)")


def markdown_notes(meta: dict, drawn: bool) -> list:
    """What a replay report adds to compare's: how the figures were made, the profile."""
    order = ("in the trace's global order (--ordered: one call at a time)" if meta.get("ordered")
             else "with one thread per traced thread, each in its own order; a release or "
             "realloc of another thread's object waits until that thread has allocated it")
    out = ["## Replay", "",
           f"- Each trace is replayed by `build/tools/locus_replay` {order}. Every allocated "
           "object is written on each of its pages; a tag written at its start is checked "
           "when it is released.",
           "- *Run time* is the replay phase as the driver timed it (loading and preparing "
           "the trace are not in it). *Peak memory* is the resident memory the replay added "
           "above the driver's own tables (the kernel's high-water mark, reset when the "
           "replay starts): the allocator's heap, its metadata and free memory. "
           "*Fragmentation* is that peak over the peak live bytes requested (computed from "
           "the trace in event order).",
           "- Instructions and cache misses, where present, are counted by callgrind inside "
           "the allocator's calls only (`--toggle-collect=replay_call`), with cachegrind's "
           "simulated caches.", ""]
    if drawn:
        out += ["### Heap profile", "",
                f"![Heap profile]({PROFILE_PNG})", "",
                "_Seed 004 Fig. 5: the bytes the trace's live objects requested (black) and "
                "the resident memory each allocator held for them, over allocation time "
                "(first repetition, about 1000 samples of /proc/self/statm)._", ""]
    return out


def draw(folder: Path, meta: dict, runs: list, console: Console, draw_plots: bool) -> list:
    """Tables, files and plots of a replay folder: compare's, plus the heap profile."""
    summary = results.summarise(meta, runs)
    report.print_summary(console, summary, meta)
    drawn = draw_plots and draw_heap_profiles(folder, meta)
    files = report.write_all(folder, summary, meta, results.rows(summary), runs,
                             plots=draw_plots,
                             extra_markdown=markdown_notes(meta, drawn))
    return files + ([PROFILE_PNG] if drawn else [])
