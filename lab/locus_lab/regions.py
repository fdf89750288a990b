"""`locus compare --suite regions`: the seed's region evaluation (seed 004 §§5-8).

build/bench/regions runs three region programs (compiler, parser, server) over one of several
region implementations, its *mode* (bench/regions.c). Each workload runs in each mode under
the allocators where that mode means something:
  locus      under every chosen Locus library (the regions are the library's own)
  emulate    region emulation over malloc/free (seed 004 §5.1), under glibc, each chosen
             peer and each chosen Locus library
  bump       a pure bump region (the speed limit), under glibc, whose malloc gives its chunks
  talloc, apr, mi_heap, je_arena   the peers' own arenas, under glibc (each brings its own
             allocator: talloc and APR over malloc, mimalloc's heaps, jemalloc's arenas)
The program prints its checksum (the same in every mode), the peak live bytes, the peak
memory held and the held/live area ratio (the seed's drag); the lab adds time and peak RSS.

A results folder of this suite has "suite": "regions" in meta.json; runs are records of kind
"region" in runs.jsonl, and `locus report DIR` re-draws it like any other (draw). The run
itself is run_regions, at the end.
"""
from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from . import allocators as alloc_mod
from . import plots, report, session, stats, suite
from .common import LabError, human_bytes

SUITE = "regions"
PROGRAM = "regions"
WORKLOADS = {
    "compiler": "lcc-like: per function an AST of small nodes, walked, lowered, region cleared",
    "parser": "197.parser-like: small objects, 45% of steps free a recent one, rest die at "
              "the sentence's clear",
    "server": "apache-like: connection, request and handler regions, some buckets freed "
              "inside",
}
# The peers' own arenas: mode -> (library, Debian package)
PEER_MODES = {
    "talloc": ("libtalloc.so.2", "libtalloc2"),
    "apr": ("libapr-1.so.0", "libapr1"),
    "mi_heap": ("libmimalloc.so.2", "libmimalloc2.0"),
    "je_arena": ("libjemalloc.so.2", "libjemalloc2"),
}
MODES = ("locus", "bump", "emulate", *PEER_MODES)
NOMINAL_S = 1.5             # a run at scale 1 under glibc; --quick does 1/20 of it
PROFILES = "profiles"       # folder of the programs' --profile CSVs (first repetition)
METRICS = ("live_peak_kib", "held_peak_kib", "hwm_kib", "held_live_area", "samples",
           "sample_every")
UNAVAILABLE = "unavailable"
DERIVED_FILES = ("regions_time.png", "regions_memory.png", "regions_profile.png")


@dataclass(frozen=True)
class Config(session.ProgramConfig):
    @property
    def stem(self) -> str:
        return f"{self.workload}-{self.mode}-{self.allocator}"


def peer_modes() -> tuple[list, list]:
    """The peer arena modes whose library is installed, and notes for the missing ones."""
    found, notes = [], []
    for mode, (soname, package) in PEER_MODES.items():
        if alloc_mod.find_library(soname):
            found.append(mode)
        else:
            notes.append(f"{mode} regions skipped: {soname} is not installed "
                         f"(apt-get install {package})")
    return found, notes


def plan(allocs: list, workloads: list, modes: list) -> list:
    """The (workload, mode, allocator) runs, in table order. allocs are Allocator objects,
    glibc among them; modes are the peer modes available."""
    system = next(a.name for a in allocs if a.kind == "system")
    locus = [a.name for a in allocs if a.kind in ("locus", "custom")]
    peers = [a.name for a in allocs if a.kind == "peer"]
    out = []
    for w in workloads:
        out += [Config(w, "locus", a) for a in locus]
        out.append(Config(w, "bump", system))
        out += [Config(w, m, system) for m in PEER_MODES if m in modes]
        out += [Config(w, "emulate", a) for a in [system, *peers, *locus]]
    return out


def select_workloads(spec: str | None) -> list:
    return suite.select_workloads(list(WORKLOADS), spec, kind="region ")


def argv(program: Path, config: Config, quick: bool, profile: Path | None = None) -> list:
    out = [str(program), config.workload, config.mode, "1"] + (["--quick"] if quick else [])
    return out + (["--profile", str(profile)] if profile else [])


# ---- one run's output ---------------------------------------------------------------------------

_RESULT = re.compile(r"regions: (\w+) .*checksum=([0-9a-f]{16})$")


def parse_output(text: str) -> dict:
    """The program's key=value lines (as numbers) and its result line."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        m = _RESULT.fullmatch(line)
        if m:
            out["result"] = line
            out["checksum"] = m.group(2)
            frees = re.search(r" frees=(\d+)", line)
            if frees:
                out["frees"] = int(frees.group(1))
            continue
        key, sep, value = line.partition("=")
        if sep and key in METRICS:
            try:
                out[key] = float(value) if "." in value else int(value)
            except ValueError:
                continue
    return out


def run_status(result_json: dict, parsed: dict) -> str:
    """ok, unavailable (exit 2 saying so: the mode's library is missing or lacks regions),
    or the runner's status; a run that printed no result line is not ok."""
    status = result_json["status"]
    if status == "exit 2" and UNAVAILABLE in result_json.get("stderr_tail", ""):
        return UNAVAILABLE
    return session.program_status(result_json, parsed)


# ---- summary ------------------------------------------------------------------------------------

def summarise(meta: dict, runs: list) -> dict:
    """Medians per (workload, mode, allocator); checksums compared across a workload's runs;
    times and peak RSS relative to the bump region on the same workload; the checks."""
    configs = Config.all_in(meta)
    cells = {}
    for c in configs:
        mine = [r for r in runs if r.get("kind") == "region" and r.get("workload") == c.workload
                and r.get("mode") == c.mode and r.get("allocator") == c.allocator]
        ok = [r for r in mine if r.get("status") == "ok"]
        statuses = [r.get("status") for r in mine]
        failed = [s for s in statuses if s != "ok"]
        cell = {**asdict(c), "runs": len(mine), "ok_runs": len(ok),
                "status": stats.overall_status(statuses)}
        cell["wall_s"] = stats.median(r.get("wall_s") for r in ok)
        cell["cpu_s"] = stats.median((r.get("user_s") or 0) + (r.get("sys_s") or 0) for r in ok)
        cell["maxrss_kib"] = stats.median(r.get("maxrss_kib") for r in ok)
        for m in METRICS:
            cell[m] = stats.median(r.get(m) for r in ok)
        results = Counter(r.get("result") for r in ok)
        cell["result"] = results.most_common(1)[0][0] if results else None
        cell["frees"] = next((r.get("frees") for r in ok if r.get("frees") is not None), None)
        if failed:
            cell["failure"] = next((r.get("stderr_tail", "") for r in mine
                                    if r.get("status") != "ok"), "")
        cells[(c.workload, c.mode, c.allocator)] = cell

    # Every correct run of a workload prints the same result line (its checksum depends on the
    # seeds alone): the most common one is right, the others are failures.
    stats.flag_disagreeing(cells, "result", "printed `{}`, the others `{}`")

    system = next((a["name"] for a in meta.get("allocators", []) if a["kind"] == "system"),
                  alloc_mod.BASELINE)
    for (w, _, _), cell in cells.items():
        bump = cells.get((w, "bump", system))
        good = cell["status"] == "ok" and bump and bump["status"] == "ok"
        cell["cpu_vs_bump"] = stats.ratio(cell["cpu_s"], bump["cpu_s"]) if good else None
        cell["maxrss_vs_bump"] = stats.ratio(cell["maxrss_kib"], bump["maxrss_kib"]) if good else None

    flagship = flagship_name(meta)
    return {"suite": SUITE, "workloads": sorted({c.workload for c in configs},
                                                key=list(WORKLOADS).index),
            "configs": [asdict(c) for c in configs], "cells": cells, "system": system,
            "flagship": flagship, "checks": checks(cells, meta, system, flagship)}


def flagship_name(meta: dict) -> str | None:
    """The Locus library the checks speak for: liblocus.so when it ran, else the first."""
    locus = [a for a in meta.get("allocators", []) if a["kind"] in ("locus", "custom")]
    for a in locus:
        if Path(a.get("library") or "").name == "liblocus.so":
            return a["name"]
    return locus[0]["name"] if locus else None


def checks(cells: dict, meta: dict, system: str, flagship: str | None) -> list:
    """The comparisons the seed makes, each a ratio of medians (time = user + sys CPU time):
    Locus regions against the pure bump region where nothing is freed, against each peer's
    arenas and against emulation under the fastest peer; Locus's peak RSS against emulation
    under liblocus.so, APR pools and the bump region."""
    out = []
    if flagship is None:
        return out
    peers = [a["name"] for a in meta.get("allocators", []) if a["kind"] == "peer"]

    def cell(w, mode, alloc):
        c = cells.get((w, mode, alloc))
        return c if c and c["status"] == "ok" else None

    def add(kind, w, other, metric, what):
        mine = cell(w, "locus", flagship)
        if mine is None or other is None:
            return
        ratio = stats.ratio(mine[metric], other[metric])
        if ratio is None:
            return
        out.append({"check": kind, "workload": w, "against": f"{other['mode']} / "
                    f"{other['allocator']}", "metric": metric, "ratio": ratio, "what": what})

    workloads = sorted({w for (w, _, _) in cells}, key=list(WORKLOADS).index)
    for w in workloads:
        bump = cell(w, "bump", system)
        if bump and bump.get("frees") == 0:
            add("time vs bump", w, bump, "cpu_s", "Locus regions / pure bump, time, where "
                "nothing is freed")
    for w in workloads:
        for mode in PEER_MODES:
            add("time vs peer arena", w, cell(w, mode, system), "cpu_s",
                f"Locus regions / {mode}, time")
    for w in workloads:
        emus = [c for c in (cell(w, "emulate", p) for p in peers) if c and c["cpu_s"]]
        if emus:
            fastest = min(emus, key=lambda c: c["cpu_s"])
            add("time vs emulation", w, fastest, "cpu_s",
                "Locus regions / emulation under the fastest peer, time")
    locus_lib = next((a["name"] for a in meta.get("allocators", [])
                      if Path(a.get("library") or "").name == "liblocus.so"), None)
    for w in workloads:
        for other, what in ((cell(w, "emulate", locus_lib) if locus_lib else None,
                             "emulation under liblocus.so"),
                            (cell(w, "apr", system), "APR pools"),
                            (cell(w, "bump", system), "pure bump")):
            add("peak RSS", w, other, "maxrss_kib", f"Locus regions / {what}, peak RSS")
    return out


def rows(summary: dict) -> list:
    return [dict(summary["cells"][(c["workload"], c["mode"], c["allocator"])])
            for c in summary["configs"]]


# ---- presentation -------------------------------------------------------------------------------

COLUMNS = ("workload", "mode", "allocator", "CPU", "CPU/bump", "wall", "peak RSS", "RSS/bump",
           "live peak", "held peak", "held/live")


def cell_texts(cell: dict) -> list:
    head = [cell["workload"], cell["mode"], cell["allocator"]]
    if cell["status"] != "ok":
        return head + [cell["status"]] + [""] * (len(COLUMNS) - 4)
    kib = lambda k: human_bytes(cell[k] * 1024) if cell.get(k) is not None else "-"  # noqa: E731
    return head + [f"{cell['cpu_s']:.2f} s", report.fmt_times(cell.get("cpu_vs_bump")),
                   f"{cell['wall_s']:.2f} s", kib("maxrss_kib"), report.fmt_times(cell.get("maxrss_vs_bump")),
                   kib("live_peak_kib"), kib("held_peak_kib"),
                   f"{cell['held_live_area']:.2f}" if cell.get("held_live_area") else "-"]


TABLE_NOTE = ("medians; CPU = user + sys time; /bump = relative to the pure bump region "
              "under glibc on the same workload; peak RSS sampled by the lab; live peak, "
              "held peak and held/live (area under the memory held over the area under the "
              "memory live, over allocation time: the seed's drag with the allocator's "
              "overhead) measured by the program")


def check_lines(summary: dict) -> list:
    lines = []
    for c in summary["checks"]:
        lines.append(f"{c['workload']}: {c['what']} ({c['against']}): {c['ratio']:.2f}x")
    return lines


def print_summary(console: Console, summary: dict, meta: dict) -> None:
    t = Table(title="Regions (seed 004)", caption=TABLE_NOTE, title_justify="left",
              caption_justify="left")
    for i, col in enumerate(COLUMNS):
        t.add_column(col, justify="left" if i < 3 else "right", no_wrap=i < 3)
    previous = None
    for row in rows(summary):
        if previous and row["workload"] != previous:
            t.add_section()
        previous = row["workload"]
        texts = cell_texts(row)
        if row["status"] != "ok":
            texts[3] = f"[red]{texts[3]}[/red]"
        t.add_row(*texts)
    console.print(t)
    lines = check_lines(summary)
    if lines:
        console.print(f"[bold]Checks[/bold] (Locus = {summary['flagship']}; time = CPU time)")
        for line in lines:
            console.print(f"  {line}")
    for note in meta.get("notes", []):
        console.print(f"[yellow]note:[/yellow] {note}")


def write_markdown(folder: Path, summary: dict, meta: dict, pngs: list) -> None:
    out = report.md_suite_heading("Regions (seed 004)", meta, "locus compare --suite regions")
    lines = check_lines(summary)
    if lines:
        out += ["## Checks", "", f"_Locus = {summary['flagship']}; time = user + sys CPU "
                "time; ratios of medians._", ""] + [f"- {line}" for line in lines] + [""]
    out += ["## Results", "", f"_{TABLE_NOTE}._", "",
            "| " + " | ".join(COLUMNS) + " |", "|---|---|---|" + "---:|" * (len(COLUMNS) - 3)]
    out += ["| " + " | ".join(cell_texts(r)) + " |" for r in rows(summary)]
    out.append("")
    for png, title in (("regions_time.png", "Time"), ("regions_memory.png", "Memory"),
                       ("regions_profile.png", "Memory profiles (seed 004 Fig. 5)")):
        if png in pngs:
            out += [f"## {title}", "", f"![{title}]({png})", ""]
    out += report.md_failures("Not run or failed", rows(summary),
                              lambda r: f"{r['workload']} {r['mode']} under {r['allocator']}")
    results = {w: next((r["result"] for r in rows(summary)
                        if r["workload"] == w and r["status"] == "ok"), None)
               for w in summary["workloads"]}
    out += ["## Workloads", "", "| workload | what | result line (every mode) |",
            "|---|---|---|"]
    out += [f"| {w} | {WORKLOADS[w]} | `{results[w] or '-'}` |" for w in summary["workloads"]]
    out += [""] + report.md_allocators_and_notes(meta)
    out += ["## Method", "",
            "- `build/bench/regions WORKLOAD MODE 1` per run (bench/regions.c); the modes: "
            "`locus` (the Locus region API of the preloaded library), `bump` (a pure bump "
            "region: frees are no-ops), `emulate` (every object malloc'd and recorded, freed "
            "at the clear), `talloc`, `apr`, `mi_heap`, `je_arena` (the peers' arenas, "
            "loaded with dlopen).",
            "- `locus` runs under each Locus library, `emulate` under glibc, each peer and "
            "each Locus library, the others under glibc.",
            "- Repetitions are interleaved: each repetition runs a workload's configurations "
            "back to back in a rotated order. Times are the kernel's accounting (wait4); "
            "peak RSS is the largest VmHWM, sampled every 5 ms.",
            "- The program counts live bytes (objects not freed, not cleared and not past "
            "their last use) and samples the memory held (resident set above its start) at "
            "even steps of allocation time: `held/live` is the ratio of the areas under the "
            "two curves. The curves of the first repetition are in `profiles/`.",
            "", "Raw data: `runs.jsonl` and `meta.json`; `locus report <folder>` re-draws the "
            "rest.", ""]
    (folder / "report.md").write_text("\n".join(out))


# ---- plots --------------------------------------------------------------------------------------

def _bar_panel(ax, summary, key, ylabel, log=False, ref=None, unit=1.0):
    """One bar per configuration (mode / allocator) in every workload's group: cell[key]/unit
    where the cell ran and has a value."""
    labels = list(dict.fromkeys(f"{c['mode']} / {c['allocator']}" for c in summary["configs"]))

    def value(label, w):
        mode, alloc = label.split(" / ")
        cell = summary["cells"].get((w, mode, alloc))
        return cell[key] / unit if cell and cell["status"] == "ok" and cell.get(key) else None

    plots.grouped_bars(ax, summary["workloads"],
                       [(label, lambda w, label=label: value(label, w)) for label in labels],
                       ylabel, ref=ref, log=log)


def plot_all(folder: Path, summary: dict) -> list:
    plt = plots.pyplot()
    written = []
    fig, axes = plt.subplots(1, 1, figsize=(11, 4.2), squeeze=False)
    axes = [axes[0][0]]
    _bar_panel(axes[0], summary, "cpu_vs_bump", "CPU time (x bump region)", log=True, ref=1.0)
    plots.save_with_legend(fig, axes, folder / "regions_time.png",
                           "Region workloads: CPU time relative to the pure bump region "
                           "(log scale)", ncol=4, fontsize=8)
    written.append("regions_time.png")

    fig, ax = plt.subplots(2, 1, figsize=(11, 8), squeeze=False)
    axes = [ax[0][0], ax[1][0]]
    _bar_panel(axes[0], summary, "maxrss_kib", "peak RSS (MiB)", unit=1024.0)
    _bar_panel(axes[1], summary, "held_live_area", "held / live (areas)", log=True, ref=1.0)
    plots.save_with_legend(fig, axes, folder / "regions_memory.png",
                           "Region workloads: peak RSS and memory held over memory live",
                           ncol=4, fontsize=8)
    written.append("regions_memory.png")

    profiles = folder / PROFILES
    panels = []
    for w in summary["workloads"]:
        curves = [(f"{c['mode']} / {c['allocator']}",
                   plots.read_profile(profiles / f"{Config(**c).stem}.csv"))
                  for c in summary["configs"] if c["workload"] == w]
        panels.append((w, [(label, rows) for label, rows in curves if rows]))
    if plots.draw_profiles(folder / "regions_profile.png", panels, "live (every mode)"):
        written.append("regions_profile.png")
    return written


# ---- the run: `locus compare --suite regions` ----------------------------------------------------

def run_regions(opts, console: Console) -> int:
    """`locus compare --suite regions` (opts: compare.CompareOptions): each region workload
    in each mode under the allocators the mode runs under (plan), repetitions interleaved."""
    if opts.cache:
        raise LabError("--cache is not available with --suite regions")
    workloads, paths, program = session.suite_program(opts, SUITE, PROGRAM, select_workloads)
    allocs, notes = session.suite_allocators(paths, opts.allocators, opts.baseline)
    modes, mode_notes = peer_modes()
    configs = plan(allocs, workloads, modes)
    reps = session.repetitions(opts)
    out = session.output_folder(opts)
    nominal = NOMINAL_S / (20 if opts.quick else 1)
    estimate = nominal * len(configs) * reps
    session.print_notes(console, notes + mode_notes)
    console.print(f"[bold]locus compare --suite regions[/bold]: {len(configs)} "
                  f"configurations x {reps} repetition(s); estimated "
                  f"{session.format_duration(estimate)}")
    console.print("  allocators: " + ", ".join(a.name for a in allocs))
    console.print("  workloads:  " + ", ".join(workloads) + "; modes: "
                  + ", ".join(m for m in MODES if any(c.mode == m for c in configs)))

    base_env, env_notes = session.base_environment()
    meta = {**session.meta_head(opts, paths, reps), "suite": SUITE,
            "baseline": alloc_mod.BASELINE,
            "allocators": [a.to_json() for a in allocs],
            "workloads": [{"name": w, "description": WORKLOADS[w]} for w in workloads],
            "configs": [asdict(c) for c in configs],
            "notes": notes + mode_notes + env_notes}
    writer = session.open_results(out, meta)
    profiles = out / PROFILES
    shutil.rmtree(profiles, ignore_errors=True)
    profiles.mkdir()
    by_name = {a.name: a for a in allocs}
    runs: list = []

    def run_all(step, progress):
        for rep, w, c in session.interleaved(configs, workloads, reps):
            cmd = argv(program, c, opts.quick, profiles / f"{c.stem}.csv" if rep == 0 else None)
            entry = session.run_suite_program(
                step, "region", c, rep, reps, cmd, by_name[c.allocator].environment(base_env),
                nominal, opts.timeout, parse_output, run_status)
            runs.append(entry)
            writer.add(entry)
            if entry["status"] not in ("ok", UNAVAILABLE):
                progress.console.print(session.failure_line(
                    f"{w} {c.label}", entry["status"], entry.get("stderr_tail")))

    return session.measure(console, out, writer, estimate, run_all,
                           lambda: draw(out, meta, runs, console, opts.plots), f", {PROFILES}/")


def draw(folder: Path, meta: dict, runs: list, console: Console, draw_plots: bool) -> list:
    """The summary table, CSV, JSON, plots and report.md of a regions results folder (also
    `locus report`'s); returns the files written."""
    summary = summarise(meta, runs)
    print_summary(console, summary, meta)
    table = rows(summary)
    try:
        report.write_csv(folder / "runs.csv", runs)
        report.write_csv(folder / "summary.csv", table)
        (folder / "summary.json").write_text(json.dumps(
            {"suite": SUITE, "flagship": summary["flagship"], "results": table,
             "checks": summary["checks"]}, indent=2) + "\n")
        written = plot_all(folder, summary) if draw_plots else []
        write_markdown(folder, summary, meta, written)
    except OSError as e:
        raise LabError(f"cannot write the report into {folder}: {e.strerror or e}") from None
    return ["report.md", "summary.csv", "summary.json", "runs.csv", *written]
