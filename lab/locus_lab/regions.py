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
"region" in runs.jsonl, and `locus report DIR` re-draws it like any other.
"""
from __future__ import annotations

import re
import statistics
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from . import allocators as alloc_mod
from . import report, suite
from .common import human_bytes

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
WRONG_CHECKSUM = "wrong checksum"


def flag_disagreeing(cells: dict, field: str, failure: str) -> None:
    """Cells keyed (workload, mode, allocator): where the runs of a workload disagree on
    `field` (a checksum or result line that depends on the seeds alone), the most common value
    is right and the other cells become failures (failure.format(theirs, right))."""
    for w in {key[0] for key in cells}:
        values = Counter(cell[field] for key, cell in cells.items() if key[0] == w and cell[field])
        if len(values) > 1:
            right = values.most_common(1)[0][0]
            for key, cell in cells.items():
                if key[0] == w and cell[field] and cell[field] != right:
                    cell["status"] = WRONG_CHECKSUM
                    cell["failure"] = failure.format(cell[field], right)
DERIVED_FILES = ("regions_time.png", "regions_memory.png", "regions_profile.png")


@dataclass(frozen=True)
class Config:
    workload: str
    mode: str
    allocator: str

    @property
    def label(self) -> str:
        return f"{self.mode} / {self.allocator}"

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
    if status == "ok" and "checksum" not in parsed:
        return "no result"
    return status


# ---- summary ------------------------------------------------------------------------------------

def _median(values):
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def _ratio(a, b):
    return a / b if a is not None and b else None


def configs_of(meta: dict) -> list:
    return [Config(**c) for c in meta.get("configs", [])]


def summarise(meta: dict, runs: list) -> dict:
    """Medians per (workload, mode, allocator); checksums compared across a workload's runs;
    times and peak RSS relative to the bump region on the same workload; the checks."""
    configs = configs_of(meta)
    cells = {}
    for c in configs:
        mine = [r for r in runs if r.get("kind") == "region" and r.get("workload") == c.workload
                and r.get("mode") == c.mode and r.get("allocator") == c.allocator]
        ok = [r for r in mine if r.get("status") == "ok"]
        statuses = [r.get("status") for r in mine]
        failed = [s for s in statuses if s != "ok"]
        status = ("not run" if not statuses else "ok" if not failed else
                  failed[0] if len(failed) == len(statuses) else
                  f"{failed[0]} {len(failed)}/{len(statuses)}")
        cell = {**asdict(c), "runs": len(mine), "ok_runs": len(ok), "status": status}
        cell["wall_s"] = _median(r.get("wall_s") for r in ok)
        cell["cpu_s"] = _median((r.get("user_s") or 0) + (r.get("sys_s") or 0) for r in ok)
        cell["maxrss_kib"] = _median(r.get("maxrss_kib") for r in ok)
        for m in METRICS:
            cell[m] = _median(r.get(m) for r in ok)
        results = Counter(r.get("result") for r in ok)
        cell["result"] = results.most_common(1)[0][0] if results else None
        cell["frees"] = next((r.get("frees") for r in ok if r.get("frees") is not None), None)
        if failed:
            cell["failure"] = next((r.get("stderr_tail", "") for r in mine
                                    if r.get("status") != "ok"), "")
        cells[(c.workload, c.mode, c.allocator)] = cell

    # Every correct run of a workload prints the same result line (its checksum depends on the
    # seeds alone): the most common one is right, the others are failures.
    flag_disagreeing(cells, "result", "printed `{}`, the others `{}`")

    system = next((a["name"] for a in meta.get("allocators", []) if a["kind"] == "system"),
                  alloc_mod.BASELINE)
    for (w, _, _), cell in cells.items():
        bump = cells.get((w, "bump", system))
        good = cell["status"] == "ok" and bump and bump["status"] == "ok"
        cell["cpu_vs_bump"] = _ratio(cell["cpu_s"], bump["cpu_s"]) if good else None
        cell["maxrss_vs_bump"] = _ratio(cell["maxrss_kib"], bump["maxrss_kib"]) if good else None

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
        ratio = _ratio(mine[metric], other[metric])
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


def _x(v) -> str:
    return f"{v:.2f}x" if v is not None else "-"


def cell_texts(cell: dict) -> list:
    head = [cell["workload"], cell["mode"], cell["allocator"]]
    if cell["status"] != "ok":
        return head + [cell["status"]] + [""] * (len(COLUMNS) - 4)
    kib = lambda k: human_bytes(cell[k] * 1024) if cell.get(k) is not None else "-"  # noqa: E731
    return head + [f"{cell['cpu_s']:.2f} s", _x(cell.get("cpu_vs_bump")),
                   f"{cell['wall_s']:.2f} s", kib("maxrss_kib"), _x(cell.get("maxrss_vs_bump")),
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


def write_markdown(folder: Path, summary: dict, meta: dict, plots: list) -> None:
    m = meta.get("machine", {})
    out = ["# Regions (seed 004)", "",
           f"Made by `{meta.get('command', 'locus compare --suite regions')}` on "
           f"{meta.get('created', '?')}.", "",
           f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, Linux "
           f"{m.get('kernel', '?')}, {m.get('libc', '')}. Repetitions: "
           f"{meta.get('repetitions')} (interleaved; medians)"
           f"{'; quick (1/20 of the work)' if meta.get('quick') else ''}.", ""]
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
        if png in plots:
            out += [f"## {title}", "", f"![{title}]({png})", ""]
    out += report.md_failures("Not run or failed", rows(summary),
                              lambda r: f"{r['workload']} {r['mode']} under {r['allocator']}")
    results = {w: next((r["result"] for r in rows(summary)
                        if r["workload"] == w and r["status"] == "ok"), None)
               for w in summary["workloads"]}
    out += ["## Workloads", "", "| workload | what | result line (every mode) |",
            "|---|---|---|"]
    out += [f"| {w} | {WORKLOADS[w]} | `{results[w] or '-'}` |" for w in summary["workloads"]]
    out += md_allocators_and_notes(meta)
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


def md_allocators_and_notes(meta: dict) -> list:
    """The report's table of allocators, then the run's notes as quotes."""
    out = ["", "## Allocators", "", "| name | kind | library | version |", "|---|---|---|---|"]
    for a in meta.get("allocators", []):
        out.append(f"| {a['name']} | {a['kind']} | {a.get('library') or '(none: the C library)'}"
                   f" | {a.get('version', '')} |")
    out.append("")
    for note in meta.get("notes", []):
        out += [f"> {note}", ""]
    return out


# ---- plots --------------------------------------------------------------------------------------

def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _bar_panel(ax, summary, key, ylabel, log=False, ref=None, unit=1.0):
    works = summary["workloads"]
    labels = []
    for c in summary["configs"]:
        lab = f"{c['mode']} / {c['allocator']}"
        if lab not in labels:
            labels.append(lab)
    width = 0.8 / max(1, len(labels))
    cmap = _pyplot().get_cmap("tab20")
    for i, lab in enumerate(labels):
        xs, ys = [], []
        for g, w in enumerate(works):
            mode, alloc = lab.split(" / ")
            cell = summary["cells"].get((w, mode, alloc))
            if cell and cell["status"] == "ok" and cell.get(key):
                xs.append(g - 0.4 + width * (i + 0.5))
                ys.append(cell[key] / unit)
        ax.bar(xs, ys, width, label=lab, color=cmap(i % cmap.N))
    if ref is not None:
        ax.axhline(ref, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(works)))
    ax.set_xticklabels(works)
    ax.set_ylabel(ylabel)
    if log:
        from matplotlib.ticker import NullFormatter, ScalarFormatter
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.grid(axis="y", alpha=0.3)


def _save(plt, fig, axes, path, title):
    axes[0].set_title(title)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=4, bbox_to_anchor=(0.5, 0.0),
               frameon=False, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def read_profile(path: Path) -> list:
    """(allocations, live bytes, held bytes) rows of a --profile CSV."""
    out = []
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return out
    for line in lines[1:]:
        parts = line.split(",")
        if len(parts) == 3 and all(p.isdigit() for p in parts):
            out.append(tuple(int(p) for p in parts))
    return out


def draw_profiles(path: Path, panels: list, live_label: str) -> bool:
    """Seed 004 Fig. 5: per panel (name, [(label, rows of read_profile)]), the live curve
    (black, from the first curve: the program's requests are the same in every run) and one
    held curve per run, over allocation time, log scale. False when there is nothing to draw."""
    panels = [(name, curves) for name, curves in panels if curves]
    if not panels:
        return False
    plt = _pyplot()
    fig, ax = plt.subplots(len(panels), 1, figsize=(11, 3.6 * len(panels)), squeeze=False)
    axes = [a[0] for a in ax]
    cmap = plt.get_cmap("tab20")
    def positive(data, column):  # a log scale: samples of nothing held are left out
        return [d[0] for d in data if d[column] > 0], \
            [d[column] / 1024 for d in data if d[column] > 0]

    for axis, (name, curves) in zip(axes, panels):
        axis.plot(*positive(curves[0][1], 1), color="black", linewidth=1.6, label=live_label)
        for i, (label, data) in enumerate(curves):
            axis.plot(*positive(data, 2), linewidth=0.8, color=cmap(i % cmap.N),
                      label=f"held: {label}")
        axis.set_yscale("log")
        axis.set_ylabel(f"{name}: KiB")
        axis.set_xlabel("allocation time (allocations)")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=6, ncol=3, loc="upper left")
    axes[0].set_title("Memory held and memory live over allocation time (seed 004 Fig. 5)")
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return True


def plot_all(folder: Path, summary: dict) -> list:
    plt = _pyplot()
    written = []
    fig, axes = plt.subplots(1, 1, figsize=(11, 4.2), squeeze=False)
    axes = [axes[0][0]]
    _bar_panel(axes[0], summary, "cpu_vs_bump", "CPU time (x bump region)", log=True, ref=1.0)
    _save(plt, fig, axes, folder / "regions_time.png",
          "Region workloads: CPU time relative to the pure bump region (log scale)")
    written.append("regions_time.png")

    fig, ax = plt.subplots(2, 1, figsize=(11, 8), squeeze=False)
    axes = [ax[0][0], ax[1][0]]
    _bar_panel(axes[0], summary, "maxrss_kib", "peak RSS (MiB)", unit=1024.0)
    _bar_panel(axes[1], summary, "held_live_area", "held / live (areas)", log=True, ref=1.0)
    _save(plt, fig, axes, folder / "regions_memory.png",
          "Region workloads: peak RSS and memory held over memory live")
    written.append("regions_memory.png")

    profiles = folder / PROFILES
    panels = []
    for w in summary["workloads"]:
        curves = [(f"{c['mode']} / {c['allocator']}",
                   read_profile(profiles / f"{Config(**c).stem}.csv"))
                  for c in summary["configs"] if c["workload"] == w]
        panels.append((w, [(label, rows) for label, rows in curves if rows]))
    if draw_profiles(folder / "regions_profile.png", panels, "live (every mode)"):
        written.append("regions_profile.png")
    return written
