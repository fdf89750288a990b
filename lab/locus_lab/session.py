"""What every measuring command of the lab shares (compare and its suites, replay, paging,
pressure): the options they have in common, the environment runs start from, choosing the
allocators, the repetitions and the results folder, the results folder's meta.json head,
the order of the runs, the progress bar, and the closing lines.

Commands use these public names and never each other's private ones, so that a command can
change its own internals without breaking another.
"""
from __future__ import annotations

import os
import platform
import shlex
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console
from rich.progress import (BarColumn, Progress, TaskProgressColumn, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)

from . import allocators as alloc_mod
from . import results, runner
from .common import LabError, find_paths, human_bytes


@dataclass
class RunOptions:
    """The options of every command that runs programs under several allocators and writes a
    results folder (`locus compare`, `locus replay`)."""
    allocators: str | None = None
    repetitions: int | None = None
    quick: bool = False
    output: str | None = None
    timeout: float = 600.0
    build_dir: str | None = None
    baseline: str | None = None
    plots: bool = True
    argv: list = field(default_factory=list)     # the lab's own command line, for the report


# ---- the environment and the allocators -----------------------------------------------------

def base_environment() -> tuple[dict, list]:
    """The environment every run starts from: the caller's, without a preload or tracer
    settings that would replace or watch the allocator under test; and notes saying what was
    dropped."""
    env = dict(os.environ)
    notes = []
    for key in ("LD_PRELOAD", "LOCUS_TRACE_FILE", "LOCUS_TRACE_MODE"):
        if env.pop(key, None) is not None and key == "LD_PRELOAD":
            notes.append("LD_PRELOAD from your environment was dropped: it would replace "
                         "the allocator under test")
    return env, notes


def choose_allocators(paths, spec: str | None,
                      baseline: str | None) -> tuple[list, alloc_mod.Discovery, list]:
    """The allocators of `spec` (--allocators; None: every one found) that can be preloaded,
    the baseline first; the discovery; notes. A named allocator or baseline that cannot be
    used is an error; one found but unusable is skipped with a note."""
    disc = alloc_mod.discover(paths)
    chosen = alloc_mod.select(disc, spec)
    notes = list(disc.notes)
    usable = []
    for a in chosen:
        problem = alloc_mod.check_preload(a)
        if problem is None:
            usable.append(a)
        elif spec:
            raise LabError(f"allocator {a.name} cannot be preloaded: {problem}")
        else:
            notes.append(f"{a.name} skipped: cannot be preloaded ({problem})")
    if disc.missing_peers:
        notes.append(alloc_mod.missing_message(disc.missing_peers))
    wanted = baseline or alloc_mod.BASELINE
    names = [a.name for a in usable]
    if wanted not in names:
        if baseline:
            raise LabError(f"baseline {wanted} is not among the allocators: {', '.join(names)}")
        wanted = names[0]
        notes.append(f"{alloc_mod.BASELINE} not selected: results are normalised to {wanted}")
    usable.sort(key=lambda a: a.name != wanted)  # the baseline first
    return usable, disc, notes


def suite_allocators(paths, spec: str | None, baseline: str | None, designs: tuple = (),
                     what: str = "Locus regions") -> tuple[list, list]:
    """The allocators of a suite that studies some Locus designs (regions, hints, lf): glibc
    always (the baseline, and bump and the peers' arenas run under it); then the allocators
    named, or by default liblocus.so, the Locus libraries of the given designs and the
    peers. Returns the allocators and notes."""
    if spec:
        spec = spec if spec.strip() == "all" else ",".join([alloc_mod.BASELINE, spec])
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
    allocs, _, more = choose_allocators(paths, spec, baseline or alloc_mod.BASELINE)
    return allocs, notes + more


# ---- repetitions, the results folder, meta.json ---------------------------------------------

def repetitions(opts) -> int:
    """--repetitions, else 3 (1 with --quick)."""
    reps = opts.repetitions if opts.repetitions is not None else (1 if opts.quick else 3)
    if reps < 1:
        raise LabError("--repetitions must be at least 1")
    return reps


def default_output() -> Path:
    """locus-results/<date-time>: a new folder per run, so no run overwrites another."""
    return Path("locus-results") / datetime.now().strftime("%Y%m%d-%H%M%S")


def output_folder(opts) -> Path:
    """--output, else default_output(); an existing file there is an error."""
    out = Path(opts.output) if opts.output else default_output()
    if out.exists() and not out.is_dir():
        raise LabError(f"--output {out} is a file, not a folder")
    return out


def open_results(out: Path, meta: dict) -> results.ResultsWriter:
    """The results folder's writer (meta.json written, runs.jsonl open); a folder that cannot
    be written is the user's to fix."""
    try:
        return results.ResultsWriter(out, meta)
    except OSError as e:
        raise LabError(f"cannot write to {out}: {e.strerror or e}") from None


def machine_info() -> dict:
    """The machine a results folder was measured on (meta.json's "machine")."""
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


def meta_head(opts, paths, reps: int) -> dict:
    """What every results folder's meta.json starts with."""
    return {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": "locus " + " ".join(shlex.quote(a) for a in opts.argv),
        "machine": machine_info(),
        "repository": str(paths.root),
        "repetitions": reps,
        "quick": opts.quick,
    }


# ---- the order of the runs --------------------------------------------------------------------

def rotate(items: list, k: int) -> list:
    """items rotated left by k: each repetition starts with another allocator, so slow drifts
    of the machine spread over all of them."""
    if not items:
        return items
    k %= len(items)
    return items[k:] + items[:k]


def interleaved(configs: list, workloads: list, reps: int):
    """(repetition, workload, config) in run order: each repetition runs a workload's
    configurations back to back, in an order rotated by the repetition and the workload."""
    for rep in range(reps):
        for wi, w in enumerate(workloads):
            for c in rotate([c for c in configs if c.workload == w], rep + wi):
                yield rep, w, c


# ---- suites with a program of their own (regions, hints) ------------------------------------

@dataclass(frozen=True)
class ProgramConfig:
    """One configuration of a suite's own program: a workload in a mode under an allocator."""
    workload: str
    mode: str
    allocator: str

    @property
    def label(self) -> str:
        return f"{self.mode} / {self.allocator}"

    @classmethod
    def all_in(cls, meta: dict) -> list:
        """The configurations a results folder's meta.json lists, in run-plan order."""
        return [cls(**c) for c in meta.get("configs", [])]


def suite_program(opts, suite: str, program: str, select_workloads) -> tuple:
    """The chosen workloads (select_workloads(--workloads)), the paths and the built program
    of a suite with its own program (regions, hints)."""
    if opts.command:
        raise LabError(f"--suite {suite} runs its own programs: no command after --")
    workloads = select_workloads(opts.workloads)
    paths = find_paths(opts.build_dir)
    path = paths.bench / program
    if not path.is_file():
        raise LabError(f"{path} is not built (run `make`)")
    return workloads, paths, path


def run_suite_program(step, kind: str, c: ProgramConfig, rep: int, reps: int, cmd: list,
                      env: dict, nominal: float, timeout: float, parse_output,
                      run_status) -> dict:
    """One timed run of a suite's own program (regions, hints): the runner's record, the
    program's output parsed by the suite's parse_output, and the suite's run_status."""
    res = step(f"rep {rep + 1}/{reps} {c.workload} {c.label}", nominal,
               lambda: runner.run_once(cmd, env, None, timeout, capture_stdout=True))
    data = res.to_json()
    parsed = parse_output(data.pop("stdout", ""))
    # A program may report its own VmHWM at exit: a run of a few milliseconds can end before
    # the sampler sees it (then the sampled peak is 0).
    hwm = parsed.pop("vmhwm_kib", None)
    if isinstance(hwm, int) and hwm > data["maxrss_kib"]:
        data["maxrss_kib"] = hwm
    return {"kind": kind, **asdict(c), "rep": rep, **data, **parsed,
            "status": run_status(data, parsed)}


def program_status(result_json: dict, parsed: dict) -> str:
    """The runner's status of a suite program's run, except that a run which ended well but
    printed no checksum is not ok: its figures would be missing from the tables."""
    status = result_json["status"]
    if status == "ok" and "checksum" not in parsed:
        return "no result"
    return status


# ---- what the user sees -------------------------------------------------------------------------

def format_duration(s: float) -> str:
    """Seconds as the user reads them: "42 s", "12 min", "1.5 h"."""
    if s < 90:
        return f"{s:.0f} s"
    return f"{s / 60:.0f} min" if s < 5400 else f"{s / 3600:.1f} h"


def print_notes(console: Console, notes: list) -> None:
    """Notes (skipped allocators, dropped settings) as yellow lines before the runs."""
    for note in notes:
        console.print(f"[yellow]note:[/yellow] {note}")


def progress_bar(console: Console) -> Progress:
    """The progress bar of a comparison (on a terminal only)."""
    return Progress(TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(),
                    TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                    console=console, transient=True, disable=not console.is_terminal,
                    speed_estimate_period=900)  # eta from the average speed


def stepper(console: Console, progress: Progress, task, started: float):
    """step(label, nominal seconds, fn): runs fn() as one step of the progress bar; off a
    terminal, prints one line per step instead."""
    def step(label: str, nominal: float, fn):
        progress.update(task, description=label)
        res = fn()
        progress.advance(task, nominal)
        if not console.is_terminal:
            console.print(f"[{format_duration(time.monotonic() - started):>6}] {label}: "
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


def failure_line(what: str, status: str, stderr_tail: str | None) -> str:
    """A failed run as one red line, with the last line it wrote on stderr."""
    tail = stderr_tail or ""
    return (f"[red]{what}: {status}[/red]"
            + (f" ({tail.splitlines()[-1][:120]})" if tail else ""))


def interrupted(console: Console, out: Path) -> int:
    """Ctrl-C during the runs: what was measured so far stays in the folder."""
    console.print(f"[yellow]interrupted: the runs so far are in {out}; "
                  f"`locus report {out}` draws them[/yellow]")
    return 130


def measure(console: Console, out: Path, writer: results.ResultsWriter, estimate: float,
            loop, draw, raw: str = "") -> int:
    """The measuring part of a command: loop(step, progress) makes the runs under the progress
    bar (step: see stepper; progress for printing above the bar); the results writer is
    closed however that ends. Then draw() writes the report and returns its files, and the
    closing line is printed. Ctrl-C keeps the runs so far and ends with status 130."""
    started = time.monotonic()
    try:
        with progress_bar(console) as progress:
            task = progress.add_task("starting", total=estimate)
            loop(stepper(console, progress, task, started), progress)
    except KeyboardInterrupt:
        return interrupted(console, out)
    finally:
        writer.close()
    return print_written(console, out, draw(), started, raw)


def print_written(console: Console, out: Path, files: list, started: float,
                  raw: str = "") -> int:
    """The closing line of a measuring command: the files written, the raw data (and `raw`,
    more of it), the time taken."""
    console.print(f"\nwrote {out}/: " + ", ".join(files)
                  + f" (raw: {results.RUNS_FILE}, {results.META_FILE}{raw}); "
                  f"took {format_duration(time.monotonic() - started)}")
    return 0
