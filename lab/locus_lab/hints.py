"""`locus compare --suite hints`: allocation near a hint (seed 001).

build/bench/hints runs five STL programs built amid churn, then traversed (bench/hints.cpp):
a list, a list under churn, a tree (std::map), an event queue (std::multimap) and a graph
(adjacency lists). Each
runs under every chosen allocator in two modes: `hints` (include/locus.hpp's hint allocators:
implicit hints, and cursors where the program knows the parent or neighbour) and `no-hints`
(std::allocator). The hint-free run under glibc is the baseline of every ratio.

The program prints one JSON line: build and traversal times, its checksum (the same in every
run), its own page and cache-line accuracy (for each node with a hint, whether it landed on the
hint's page / line, from the addresses: measured under every allocator, hints or not), its
peak live bytes, and the Locus statistics where a Locus library is loaded. The lab adds
repetitions (medians), peak RSS, and one cachegrind run per configuration on a reduced size
(instructions, simulated D1 and LL misses).

A results folder of this suite has "suite": "hints" in meta.json; runs are records of kind
"hint" (timed) and "hint-cache" (cachegrind) in runs.jsonl; `locus report DIR` re-draws it
(draw). The run itself is run_hints, at the end.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from . import allocators as alloc_mod
from . import plots, report, runner, session, suite
from .common import LabError, human_bytes
from .report import fmt_times
from .stats import flag_disagreeing, median, overall_status, ratio

SUITE = "hints"
PROGRAM = "hints"
WORKLOADS = {
    "list": "a std::list built by push_back amid temporaries, walked end to end; hint: the "
            "previous element",
    "churn": "a std::list of 48-byte nodes built amid churn (20 replacements in a pool of "
             "65,536 objects between two appends), walked end to end; hint: the previous element",
    "tree": "a std::map of random keys built amid temporaries, walked in order and searched; "
            "hint: the node at lower_bound (an ancestor)",
    "events": "an event-queue simulation over a std::multimap (take the earliest, schedule "
              "later ones); hint: the neighbour in time",
    "graph": "adjacency lists filled edge by edge in random order, then breadth-first "
             "searches; hint: the list's previous element",
}
MODES = ("no-hints", "hints")
DESIGNS_WITH_HINTS = ("tp", "medius")   # Locus designs run by default besides liblocus.so
NOMINAL_S = 0.45            # a run at scale 1 under glibc; --quick does 1/20 of it
CACHE_ARGS = ["--scale", "0.5", "--passes", "2"]          # cachegrind's reduced size
CACHE_ARGS_QUICK = ["--scale", "0.05", "--passes", "1"]
CACHE_NOMINAL_S = 1.0
PLOTS = ("hints_time.png", "hints_accuracy.png")


@dataclass(frozen=True)
class Config(session.ProgramConfig):
    @property
    def label(self) -> str:
        return f"{self.allocator} {self.mode}"


def plan(allocs: list, workloads: list) -> list:
    """Every workload under every allocator (the baseline first), without hints then with."""
    return [Config(w, m, a.name) for w in workloads for a in allocs for m in MODES]


def select_workloads(spec: str | None) -> list:
    return suite.select_workloads(list(WORKLOADS), spec, kind="hint ")


def argv(program: Path, config: Config, quick: bool, cache: bool = False) -> list:
    out = [str(program), config.workload, f"--{config.mode}"]
    if cache:
        return out + (CACHE_ARGS_QUICK if quick else CACHE_ARGS)
    return out + (["--quick"] if quick else [])


def parse_output(text: str) -> dict:
    """The program's JSON line, flattened: the Locus statistics become lib_* fields."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            data = json.loads(line)
        except ValueError:
            continue
        out = {k: v for k, v in data.items() if k not in ("locus", "workload", "mode")}
        locus = data.get("locus") or {}
        for k, v in locus.items():
            out[f"lib_{k}"] = v
        return out
    return {}


# ---- summary ------------------------------------------------------------------------------------

def summarise(meta: dict, runs: list) -> dict:
    """Medians per (workload, mode, allocator); checksums compared across a workload's runs;
    times and LL misses relative to glibc without hints on the same workload."""
    configs = Config.all_in(meta)
    cells = {}
    for c in configs:
        key = (c.workload, c.mode, c.allocator)
        mine = [r for r in runs if (r.get("workload"), r.get("mode"), r.get("allocator")) == key]
        timed = [r for r in mine if r.get("kind") == "hint"]
        ok = [r for r in timed if r.get("status") == "ok"]
        cell = {**asdict(c), "runs": len(timed),
                "status": overall_status([r["status"] for r in timed])}
        for k in ("build_s", "traverse_s", "wall_s", "maxrss_kib", "page_accuracy",
                  "line_accuracy", "peak_live_bytes", "hinted", "lib_hint_calls",
                  "lib_hint_same_page", "lib_hint_same_line"):
            cell[k] = median(r.get(k) for r in ok)
        cell["time_s"] = median((r.get("build_s") or 0) + (r.get("traverse_s") or 0) for r in ok)
        calls = cell["lib_hint_calls"]
        cell["lib_page_accuracy"] = ratio(cell["lib_hint_same_page"], calls)
        cell["lib_line_accuracy"] = ratio(cell["lib_hint_same_line"], calls)
        cell["rss_over_live"] = (ratio(cell["maxrss_kib"] * 1024, cell["peak_live_bytes"])
                                 if cell["maxrss_kib"] else None)
        checks = Counter(r.get("checksum") for r in ok)
        cell["checksum"] = checks.most_common(1)[0][0] if checks else None
        cache = next((r for r in mine if r.get("kind") == "hint-cache"), None)
        cell["cache_status"] = cache.get("status") if cache else None
        good = cache is not None and cache.get("status") == "ok"
        for k in ("instructions", "l1d_misses", "lld_misses"):
            cell[k] = cache.get(k) if good else None
        if cell["status"] != "ok":
            cell["failure"] = next((r.get("stderr_tail", "") for r in timed
                                    if r.get("status") != "ok"), "")
        cells[key] = cell

    flag_disagreeing(cells, "checksum", "checksum {}, the others {}")

    baseline = meta.get("baseline", alloc_mod.BASELINE)
    for (w, _, _), cell in cells.items():
        base = cells.get((w, "no-hints", baseline))
        good = cell["status"] == "ok" and base and base["status"] == "ok"
        for k, src in (("time_vs_base", "time_s"), ("traverse_vs_base", "traverse_s"),
                       ("lld_vs_base", "lld_misses"), ("instructions_vs_base", "instructions")):
            cell[k] = ratio(cell[src], base[src]) if good else None
    return {"suite": SUITE, "baseline": baseline,
            "workloads": sorted({c.workload for c in configs}, key=list(WORKLOADS).index),
            "configs": [asdict(c) for c in configs], "cells": cells}


def rows(summary: dict) -> list:
    return [dict(summary["cells"][(c["workload"], c["mode"], c["allocator"])])
            for c in summary["configs"]]


def accuracy_rows(summary: dict) -> list:
    """One row per (workload, allocator): page and line accuracy without and with hints."""
    out = []
    for c in summary["configs"]:
        if c["mode"] != "hints":
            continue
        on = summary["cells"][(c["workload"], "hints", c["allocator"])]
        off = summary["cells"].get((c["workload"], "no-hints", c["allocator"]), {})
        out.append({"workload": c["workload"], "allocator": c["allocator"],
                    "page_no_hints": off.get("page_accuracy"), "page_hints": on["page_accuracy"],
                    "line_no_hints": off.get("line_accuracy"), "line_hints": on["line_accuracy"],
                    "lib_page_hints": on["lib_page_accuracy"],
                    "traverse_vs_base_no_hints": off.get("traverse_vs_base"),
                    "traverse_vs_base_hints": on["traverse_vs_base"]})
    return out


# ---- presentation -------------------------------------------------------------------------------

COLUMNS = ("workload", "allocator", "mode", "time", "/base", "traversal", "/base", "instr",
           "D1 misses", "LL misses", "LL /base", "peak RSS", "RSS/live")
ACC_COLUMNS = ("workload", "allocator", "page (no hints)", "page (hints)", "line (no hints)",
               "line (hints)", "page (library)", "traversal /base (no hints)",
               "traversal /base (hints)")


def _pct(v) -> str:
    return f"{100 * v:.1f}%" if v is not None else "-"


def _count(v) -> str:
    if v is None:
        return "-"
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= div:
            return f"{v / div:.1f}{unit}"
    return str(v)


def cell_texts(cell: dict) -> list:
    head = [cell["workload"], cell["allocator"], cell["mode"]]
    if cell["status"] != "ok":
        return head + [cell["status"]] + [""] * (len(COLUMNS) - 4)
    return head + [f"{cell['time_s']:.3f} s", fmt_times(cell["time_vs_base"]),
                   f"{cell['traverse_s']:.3f} s", fmt_times(cell["traverse_vs_base"]),
                   _count(cell["instructions"]), _count(cell["l1d_misses"]),
                   _count(cell["lld_misses"]), fmt_times(cell["lld_vs_base"]),
                   human_bytes(cell["maxrss_kib"] * 1024) if cell["maxrss_kib"] else "-",
                   f"{cell['rss_over_live']:.2f}" if cell["rss_over_live"] else "-"]


def accuracy_texts(row: dict) -> list:
    return [row["workload"], row["allocator"], _pct(row["page_no_hints"]),
            _pct(row["page_hints"]), _pct(row["line_no_hints"]), _pct(row["line_hints"]),
            _pct(row["lib_page_hints"]), fmt_times(row["traverse_vs_base_no_hints"]),
            fmt_times(row["traverse_vs_base_hints"])]


TABLE_NOTE = ("medians; time = build + traversal (CLOCK_MONOTONIC, measured by the program); "
              "/base = relative to glibc without hints on the same workload; instr, D1 and LL "
              "misses: one cachegrind run on a reduced size (data misses; 32 KiB D1, 8 MiB LL); "
              "RSS/live = peak RSS over the program's peak live bytes (fragmentation and "
              "overhead, the program's own few MiB included)")
ACC_NOTE = ("share of the nodes that had a hint (the previous element, the tree neighbour at "
            "the insertion point) placed on the hint's 4 KiB page / 64-byte line, measured by "
            "the program from the addresses, with hints and without (the natural locality); "
            "page (library) = the Locus statistics' hint_same_page / hint_calls")


def _table(title: str, caption: str, columns: tuple, names: int, lines: list) -> Table:
    """A rich table whose first `names` columns are names; lines are (workload, texts), a
    section per workload."""
    t = Table(title=title, caption=caption, title_justify="left", caption_justify="left")
    for i, col in enumerate(columns):
        t.add_column(col, justify="left" if i < names else "right", no_wrap=i < names)
    previous = None
    for workload, texts in lines:
        if previous and workload != previous:
            t.add_section()
        previous = workload
        t.add_row(*texts)
    return t


def print_summary(console: Console, summary: dict, meta: dict) -> None:
    lines = []
    for row in rows(summary):
        texts = cell_texts(row)
        if row["status"] != "ok":
            texts[3] = f"[red]{texts[3]}[/red]"
        lines.append((row["workload"], texts))
    console.print(_table("Allocation near a hint (seed 001): time, cache and memory",
                         TABLE_NOTE, COLUMNS, 3, lines))
    console.print(_table("Page and cache-line accuracy", ACC_NOTE, ACC_COLUMNS, 2,
                         [(r["workload"], accuracy_texts(r)) for r in accuracy_rows(summary)]))
    for note in meta.get("notes", []):
        console.print(f"[yellow]note:[/yellow] {note}")


def _md_table(columns, lines) -> list:
    return (["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
            + ["| " + " | ".join(line) + " |" for line in lines])


def write_markdown(folder: Path, summary: dict, meta: dict, pngs: list) -> None:
    out = report.md_suite_heading("Allocation near a hint (seed 001)", meta,
                                  "locus compare --suite hints")
    out += ["## Accuracy", "", f"_{ACC_NOTE}._", ""]
    out += _md_table(ACC_COLUMNS, [accuracy_texts(r) for r in accuracy_rows(summary)])
    out += ["", "## Time, cache and memory", "", f"_{TABLE_NOTE}._", ""]
    out += _md_table(COLUMNS, [cell_texts(r) for r in rows(summary)])
    out.append("")
    for png, title in (("hints_time.png", "Traversal time"),
                       ("hints_accuracy.png", "Page accuracy")):
        if png in pngs:
            out += [f"## {title}", "", f"![{title}]({png})", ""]
    out += report.md_failures("Not run or failed", rows(summary),
                              lambda r: f"{r['workload']} {r['mode']} under {r['allocator']}")
    out += ["## Workloads", "", "| workload | what |", "|---|---|"]
    out += [f"| {w} | {WORKLOADS[w]} |" for w in summary["workloads"]]
    out += [""] + report.md_allocators_and_notes(meta)
    out += ["## Method", "",
            "- `build/bench/hints WORKLOAD --hints|--no-hints` per run (bench/hints.cpp); "
            "`--hints` uses include/locus.hpp's implicit hint allocators (and a cursor with "
            "the tree neighbour for tree and events), `--no-hints` std::allocator.",
            f"- cachegrind: `{' '.join(CACHE_ARGS)}` (quick: `{' '.join(CACHE_ARGS_QUICK)}`), "
            "one run per configuration.",
            "- Repetitions are interleaved; peak RSS is the largest VmHWM, sampled every 5 ms.",
            "", "Raw data: `runs.jsonl` and `meta.json`; `locus report <folder>` re-draws the "
            "rest.", ""]
    (folder / "report.md").write_text("\n".join(out))


# ---- plots --------------------------------------------------------------------------------------

def _bars(ax, summary, series, ylabel, ref=None):
    """series: (label, function of (workload) -> value or None) per bar group member."""
    plots.grouped_bars(ax, summary["workloads"], series, ylabel, ref=ref)
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.08), frameon=False)


def plot_all(folder: Path, summary: dict) -> list:
    plt = plots.pyplot()
    allocs = list(dict.fromkeys(c["allocator"] for c in summary["configs"]))
    cells = summary["cells"]

    def value(w, mode, a, key):
        c = cells.get((w, mode, a))
        return c.get(key) if c and c["status"] == "ok" else None

    fig, ax = plt.subplots(1, 1, figsize=(11, 4.6))
    _bars(ax, summary, [(f"{a} {m}", lambda w, a=a, m=m: value(w, m, a, "traverse_vs_base"))
                        for a in allocs for m in MODES],
          "traversal time (x glibc without hints)", ref=1.0)
    ax.set_title("Traversal time relative to glibc without hints")
    fig.tight_layout()
    fig.savefig(folder / "hints_time.png", dpi=110, bbox_inches="tight")
    plt.close(fig)

    fig, axes = plt.subplots(2, 1, figsize=(11, 8))
    for axis, key, what in ((axes[0], "page_accuracy", "page"),
                            (axes[1], "line_accuracy", "cache line")):
        _bars(axis, summary, [(f"{a} {m}", lambda w, a=a, m=m, k=key: (
            None if value(w, m, a, k) is None else 100 * value(w, m, a, k)))
            for a in allocs for m in MODES], f"{what} accuracy (%)")
        axis.set_ylim(0, 100)
    axes[0].set_title("Nodes on their hint's page / cache line, without and with hints")
    fig.tight_layout()
    fig.savefig(folder / "hints_accuracy.png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return list(PLOTS)


# ---- the run: `locus compare --suite hints` ------------------------------------------------------

def run_hints(opts, console: Console) -> int:
    """`locus compare --suite hints` (opts: compare.CompareOptions): each hint workload under
    each allocator, without and with hints, repetitions interleaved; then one cachegrind run
    per configuration on a reduced size."""
    workloads, paths, program = session.suite_program(opts, SUITE, PROGRAM, select_workloads)
    allocs, notes = session.suite_allocators(paths, opts.allocators, opts.baseline,
                                             DESIGNS_WITH_HINTS, "Locus libraries")
    configs = plan(allocs, workloads)
    reps = session.repetitions(opts)
    out = session.output_folder(opts)
    cache = runner.valgrind_available()
    if not cache:
        notes.append("cachegrind skipped: valgrind is not installed (apt-get install "
                     "valgrind): no instruction or miss counts")
    nominal = NOMINAL_S / (20 if opts.quick else 1)
    cache_nominal = CACHE_NOMINAL_S / (5 if opts.quick else 1)
    estimate = (nominal * reps + (cache_nominal if cache else 0)) * len(configs)
    session.print_notes(console, notes)
    console.print(f"[bold]locus compare --suite hints[/bold]: {len(configs)} "
                  f"configurations x {reps} repetition(s){' + cachegrind' if cache else ''}; "
                  f"estimated {session.format_duration(estimate)}")
    console.print("  allocators: " + ", ".join(a.name for a in allocs))
    console.print("  workloads:  " + ", ".join(workloads))

    base_env, env_notes = session.base_environment()
    meta = {**session.meta_head(opts, paths, reps), "suite": SUITE,
            "baseline": alloc_mod.BASELINE, "cache": cache,
            "allocators": [a.to_json() for a in allocs],
            "workloads": [{"name": w, "description": WORKLOADS[w]} for w in workloads],
            "configs": [asdict(c) for c in configs],
            "notes": notes + env_notes}
    writer = session.open_results(out, meta)
    by_name = {a.name: a for a in allocs}
    runs: list = []

    def run_all(step, progress):
        def record(entry: dict, label: str):
            runs.append(entry)
            writer.add(entry)
            if entry["status"] != "ok":
                progress.console.print(session.failure_line(label, entry["status"],
                                                            entry.get("stderr_tail")))

        for rep, w, c in session.interleaved(configs, workloads, reps):
            record(session.run_suite_program(
                step, "hint", c, rep, reps, argv(program, c, opts.quick),
                by_name[c.allocator].environment(base_env), nominal, opts.timeout,
                parse_output, session.program_status), f"{w} {c.label}")
        for c in configs if cache else []:
            cmd = argv(program, c, opts.quick, cache=True)
            env = by_name[c.allocator].environment(base_env)
            res = step(f"cachegrind {c.workload} {c.label}", cache_nominal,
                       lambda cmd=cmd, env=env: runner.run_cachegrind(
                           cmd, env, None, opts.timeout * runner.CACHEGRIND_SLOWDOWN))
            record({"kind": "hint-cache", **asdict(c), **res},
                   f"cachegrind {c.workload} {c.label}")

    return session.measure(console, out, writer, estimate, run_all,
                           lambda: draw(out, meta, runs, console, opts.plots))


def draw(folder: Path, meta: dict, runs: list, console: Console, draw_plots: bool) -> list:
    """The summary tables, CSV, JSON, plots and report.md of a hints results folder (also
    `locus report`'s); returns the files written."""
    summary = summarise(meta, runs)
    print_summary(console, summary, meta)
    table = rows(summary)
    accuracy = accuracy_rows(summary)
    try:
        report.write_csv(folder / "runs.csv", runs)
        report.write_csv(folder / "summary.csv", table)
        report.write_csv(folder / "accuracy.csv", accuracy)
        (folder / "summary.json").write_text(json.dumps(
            {"suite": SUITE, "baseline": summary["baseline"], "results": table,
             "accuracy": accuracy}, indent=2) + "\n")
        written = plot_all(folder, summary) if draw_plots else []
        write_markdown(folder, summary, meta, written)
    except OSError as e:
        raise LabError(f"cannot write the report into {folder}: {e.strerror or e}") from None
    return ["report.md", "summary.csv", "accuracy.csv", "summary.json", "runs.csv", *written]
