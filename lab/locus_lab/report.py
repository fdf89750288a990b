"""Presenting a summary: terminal tables, CSV and JSON, PNG plots and a Markdown report.

Everything here reads the summary made by results.summarise(), so `locus report DIR`
re-draws all of it from the raw data alone.
"""
from __future__ import annotations

import csv
import json
import math
import shlex
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .common import LabError, human_bytes
from .plots import pyplot, save_with_legend
from .suite import MANY_THREADS, SCALING_ONE, SCALING_TWO

# ---- cell formatting (shared by the terminal and Markdown tables) --------------------------------


def _failed(cell) -> str | None:
    return None if cell["status"] == "ok" else cell["status"]


def fmt_time(cell, is_base) -> str:
    if _failed(cell):
        return _failed(cell)
    spread = cell.get("wall_spread_pct")
    sp = f" ±{spread / 2:.0f}%" if spread is not None and cell["runs"] > 1 else ""
    if is_base:
        return f"{cell['wall_s']:.2f} s{sp}"
    return f"{cell['wall_norm']:.2f}x{sp}" if cell.get("wall_norm") else "-"


def fmt_memory(cell, is_base) -> str:
    if _failed(cell):
        return _failed(cell)
    if is_base:
        return human_bytes((cell.get("maxrss_kib") or 0) * 1024)
    return f"{cell['maxrss_norm']:.2f}x" if cell.get("maxrss_norm") else "-"


# Ratios shown as they are, never normalised to the baseline: seed 000's fragmentation and
# seed 002's (results.summarise).
FRAG_KEYS = ("frag", "frag_rss")


def _fmt_ratio(key):
    def fmt(cell, is_base) -> str:
        if _failed(cell):
            return _failed(cell)
        return f"{cell[key]:.2f}" if cell.get(key) else "-"
    return fmt


fmt_frag = _fmt_ratio("frag")
fmt_frag_rss = _fmt_ratio("frag_rss")


def fmt_times(v) -> str:
    """A ratio as a multiple ("1.25x"); "-" when there is none."""
    return f"{v:.2f}x" if v is not None else "-"


def fmt_count(n: float) -> str:
    for threshold, divisor, unit in ((1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e4, 1e3, "k")):
        if n >= threshold:
            return f"{n / divisor:.1f} {unit}"
    return f"{n:,.0f}"


def fmt_cache(key):
    def fmt(cell, is_base):
        if cell.get("cache_status") not in (None, "ok"):
            return cell["cache_status"]
        value = cell.get(key)
        if value is None:
            return "-"
        if is_base:
            return fmt_count(value)
        norm = cell.get(key + "_norm")
        return f"{norm:.2f}x" if norm else "-"
    return fmt


# Marks a workload's row that the geometric means leave out (threads1: a baseline for the
# scaling table, not a workload of its own).
NOT_IN_GEOMEAN = "†"


def _label(summary, workload) -> str:
    return (f"{workload} {NOT_IN_GEOMEAN}" if workload in summary.get("not_in_geomean", ())
            else workload)


def _shows_geomean(summary) -> bool:
    """A geomean row only when it averages more than one workload."""
    excluded = summary.get("not_in_geomean", ())
    return sum(1 for w in summary["workloads"] if w not in excluded) > 1


def _geo(summary, key):
    out = {}
    for a in summary["allocators"]:
        v = summary["geomean"][a].get(key)
        out[a] = "-" if v is None else (f"{v:.2f}x" if key not in FRAG_KEYS else f"{v:.2f}")
    return out


def tables(summary: dict) -> list:
    """(title, note, formatter, geomean key) for each table that has data."""
    base = summary["baseline"]
    out = [
        ("Run time", f"median wall time; {base} in seconds, others as a multiple of {base}; "
                     "± half the (max-min) spread", fmt_time, "wall_norm"),
        ("Peak memory", f"median peak RSS; {base} in bytes, others as a multiple of {base}",
         fmt_memory, "maxrss_norm"),
    ]
    cells = summary["cells"].values()
    if any(c.get("frag") for c in cells):
        out.append(("Fragmentation", "peak anonymous memory / peak live bytes requested "
                    "(1.00 = no overhead)", fmt_frag, "frag"))
    if any(c.get("frag_rss") for c in cells):
        out.append(("Fragmentation, seed 002", "peak RSS (all the memory the process holds "
                    "from the OS) / peak live bytes requested", fmt_frag_rss, "frag_rss"))
    if any("instructions" in c for c in cells):
        for key, title in (("instructions", "Instructions"), ("l1_misses", "L1 misses"),
                           ("ll_misses", "Last-level cache misses")):
            out.append((title + " (cachegrind)", f"one run each; {base} as a count, others "
                        f"as a multiple of {base}", fmt_cache(key), key + "_norm"))
    excluded = summary.get("not_in_geomean", [])
    if excluded:
        foot = f"; {NOT_IN_GEOMEAN} not in the geomean: {', '.join(excluded)}"
        out = [(title, note + foot, fmt, key) for title, note, fmt, key in out]
    return out


SCALING_DEFINITION = (f"2 x median wall time of {SCALING_ONE} / that of {SCALING_TWO} "
                      "(same work per thread); 2.00 = ideal")


def scaling_machine_note(meta: dict) -> str:
    # Wall-clock scaling measures the machine as much as the allocator: say which machine.
    cores = meta.get("machine", {}).get("cores") or "?"
    return (f"Measured on {cores} cores; wall-clock scaling needs two idle cores (a busy or "
            "one-core machine caps it, whatever the allocator).")


MANY_DEFINITION = (f"median wall time of threads2's loop with the total work of {SCALING_TWO} "
                   f"split over N threads, and its ratio to {SCALING_TWO}'s (N / 2); "
                   "1.00 = the extra threads cost nothing")


def many_thread_table(summary: dict) -> tuple[list, list] | None:
    """Header and rows of the many-thread table (strings), or None without data: per
    allocator, threads2's time, then each many-thread workload's time and ratio."""
    many = summary.get("many_threads") or {}
    if not many:
        return None
    present = [name for name in MANY_THREADS if any(name in m["runs"] for m in many.values())]
    header = ["allocator", "2 threads"]
    for name in present:
        header += [f"{MANY_THREADS[name]} threads", f"{MANY_THREADS[name]} / 2"]
    rows = []
    for a, m in many.items():
        row = [a, f"{m['t2_s']:.2f} s"]
        for name in present:
            r = m["runs"].get(name)
            row += [f"{r['t_s']:.2f} s", f"{r['ratio']:.2f}x"] if r else ["-", "-"]
        rows.append(row)
    return header, rows


# ---- terminal ---------------------------------------------------------------------------------

def _column_groups(width: int, first: int, columns: list) -> list:
    """Splits columns (name, width) into groups that fit a terminal `width` wide next to a
    first column `first` wide."""
    groups, current, used = [], [], first + 4
    for name, w in columns:
        need = w + 3
        if current and used + need > width:
            groups.append(current)
            current, used = [], first + 4
        current.append(name)
        used += need
    if current:
        groups.append(current)
    return groups


def print_summary(console: Console, summary: dict, meta: dict) -> None:
    base = summary["baseline"]
    works = summary["workloads"]
    first = max([len(_label(summary, w)) for w in works] + [len("geomean"), len("workload")])
    for title, note, fmt, geo_key in tables(summary):
        geo = _geo(summary, geo_key)
        texts = {a: [fmt(summary["cells"][(w, a)], a == base) for w in works]
                 for a in summary["allocators"]}
        widths = [(a, max([len(t) for t in texts[a]] + [len(geo[a]), len(a)]))
                  for a in summary["allocators"]]
        groups = _column_groups(console.width, first, widths)
        for gi, group in enumerate(groups):
            part = f" ({gi + 1}/{len(groups)})" if len(groups) > 1 else ""
            t = Table(title=f"{title}{part}", caption=note if gi == len(groups) - 1 else None,
                      title_justify="left", caption_justify="left")
            t.add_column("workload", style="bold", no_wrap=True)
            for a in group:
                t.add_column(a, justify="right", style="cyan" if a == base else None,
                             min_width=len(a))
            for i, w in enumerate(works):
                row = []
                for a in group:
                    cell = summary["cells"][(w, a)]
                    text = texts[a][i]
                    if _failed(cell) or (cell.get("cache_status") not in (None, "ok")
                                         and "cachegrind" in title):
                        text = f"[red]{text}[/red]"
                    row.append(text)
                t.add_row(_label(summary, w), *row)
            if _shows_geomean(summary):
                t.add_section()
                t.add_row("geomean", *[("1.00x" if a == base and geo_key not in FRAG_KEYS
                                        else geo[a]) for a in group])
            console.print(t)
        console.print()
    print_scaling(console, summary, meta)
    print_many_threads(console, summary)
    for note in meta.get("notes", []):
        console.print(f"[yellow]note:[/yellow] {note}")
    lines = summary["verdict"]["lines"]
    if lines:  # last: the answer the comparison was run for
        console.print("[bold]Verdict[/bold]")
        for line in lines:
            console.print(f"  {line}")


def print_scaling(console: Console, summary: dict, meta: dict) -> None:
    scaling = summary.get("scaling") or {}
    if not scaling:
        return
    t = Table(title="Two-thread scaling", caption=SCALING_DEFINITION, title_justify="left",
              caption_justify="left")
    for col in ("allocator", "1 thread", "2 threads", "scaling"):
        t.add_column(col, justify="left" if col == "allocator" else "right",
                     style="bold" if col == "allocator" else None)
    for a, s in scaling.items():
        t.add_row(a, *_scaling_cells(s))
    console.print(t)
    console.print(scaling_machine_note(meta))
    console.print()


def print_many_threads(console: Console, summary: dict) -> None:
    table = many_thread_table(summary)
    if not table:
        return
    header, rows = table
    t = Table(title="Many threads", caption=MANY_DEFINITION, title_justify="left",
              caption_justify="left")
    for col in header:
        t.add_column(col, justify="left" if col == "allocator" else "right",
                     style="bold" if col == "allocator" else None)
    for row in rows:
        t.add_row(*row)
    console.print(t)
    console.print()


def _scaling_cells(s: dict) -> list:
    return [f"{s['t1_s']:.2f} s", f"{s['t2_s']:.2f} s", f"{s['scaling']:.2f}"]


# ---- machine-readable files ----------------------------------------------------------------------

def write_csv(path: Path, rows: list) -> None:
    keys = []
    for r in rows:
        for k in r:
            if k not in keys and k != "failure":
                keys.append(k)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in keys})


def write_json(path: Path, summary: dict, rows: list) -> None:
    data = {"baseline": summary["baseline"], "allocators": summary["allocators"],
            "workloads": summary["workloads"], "results": rows,
            "not_in_geomean": summary.get("not_in_geomean", []),
            "geomean": summary["geomean"], "scaling": summary.get("scaling", {}),
            "many_threads": summary.get("many_threads", {}), "verdict": summary["verdict"]}
    path.write_text(json.dumps(data, indent=2) + "\n")


# ---- plots ------------------------------------------------------------------------------------

# A panel shows at most this many allocators; with more (`--allocators all`), a figure gets one
# panel per group of them, each with the baseline and its own legend.
MAX_SERIES = 8


def series_groups(allocators: list, baseline: str, most: int = MAX_SERIES) -> list:
    """The allocators split into groups of at most `most`, each led by the baseline and as
    even in size as possible; one group when they fit."""
    if len(allocators) <= most:
        return [list(allocators)]
    others = [a for a in allocators if a != baseline]
    n = math.ceil(len(others) / (most - 1))
    size = math.ceil(len(others) / n)
    return [[baseline] + others[i:i + size] for i in range(0, len(others), size)]


def _bars(ax, summary, value, error=None, ylabel="", ref=1.0, geo_key=None, log=False,
          allocs=None):
    """Grouped bars: one group per workload (plus the geometric mean), one bar per allocator
    (`allocs`, default all of them; an allocator keeps its colour in every panel)."""
    everyone = summary["allocators"]
    allocs, works = allocs or everyone, list(summary["workloads"])
    groups = works + (["geomean"] if geo_key and _shows_geomean(summary) else [])
    width = 0.8 / max(1, len(allocs))
    colors = pyplot().get_cmap("tab10" if len(everyone) <= 10 else "tab20")
    for i, a in enumerate(allocs):
        xs, ys, errs, fails = [], [], [[], []], []
        for g, w in enumerate(groups):
            x = g - 0.4 + width * (i + 0.5)
            if w == "geomean":
                v = summary["geomean"][a].get(geo_key)
                lo = hi = 0.0
            else:
                cell = summary["cells"][(w, a)]
                if cell["status"] != "ok":
                    fails.append(x)
                    continue
                v = value(cell)
                lo, hi = error(cell) if error else (0.0, 0.0)
            if v is None or (isinstance(v, float) and math.isnan(v)):
                continue
            xs.append(x)
            ys.append(v)
            errs[0].append(max(0.0, lo))
            errs[1].append(max(0.0, hi))
        ax.bar(xs, ys, width, label=a, color=colors(everyone.index(a) % colors.N),
               yerr=errs if error and any(errs[0] + errs[1]) else None, capsize=2,
               error_kw={"elinewidth": 0.8})
        for x in fails:
            ax.text(x, 0, "x", color="red", ha="center", va="bottom", fontsize=8,
                    fontweight="bold")
    if ref is not None:
        ax.axhline(ref, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g if g == "geomean" else _label(summary, g) for g in groups],
                       rotation=30, ha="right")
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)


def _draw(path: Path, summary: dict, title: str, panels: list) -> None:
    """One figure: for each group of allocators (series_groups), one panel per entry of
    `panels` ((value, error, ylabel, geomean key)); one legend under the figure when there is
    one group, else a legend in each panel."""
    plt = pyplot()
    groups = series_groups(summary["allocators"], summary["baseline"])
    most = max(len(g) for g in groups)
    width = max(8.0, 1.2 + 0.22 * most * (len(summary["workloads"]) + 1))
    n = len(panels) * len(groups)
    fig, axes = plt.subplots(n, 1, figsize=(min(width, 22), 3.6 * n), squeeze=False)
    axes = [ax for row in axes for ax in row]
    for gi, group in enumerate(groups):
        for pi, (value, error, ylabel, geo_key) in enumerate(panels):
            ax = axes[gi * len(panels) + pi]
            _bars(ax, summary, value, error, ylabel, geo_key=geo_key, allocs=group)
            if len(groups) > 1:  # each panel's own legend, beside it
                ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.005, 1.0),
                          frameon=False)
    if len(groups) == 1:
        save_with_legend(fig, axes, path, title)
        return
    fig.suptitle(title + f" ({len(summary['allocators'])} allocators, {len(groups)} panels)")
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / fig.get_figheight()))  # room for the title
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def plot_all(folder: Path, summary: dict) -> list:
    """Writes the PNG plots; returns their file names."""
    base = summary["baseline"]
    written = []

    def err(cell):
        b = summary["cells"][(cell["workload"], base)]
        if not b.get("wall_s") or cell.get("wall_min_s") is None:
            return (0.0, 0.0)
        n = cell["wall_norm"]
        return (n - cell["wall_min_s"] / b["wall_s"], cell["wall_max_s"] / b["wall_s"] - n)

    _draw(folder / "time.png", summary,
          f"Run time normalised to {base} (median, bars: min-max; x = failed)",
          [(lambda c: c.get("wall_norm"), err, f"run time (x {base})", "wall_norm")])
    written.append("time.png")

    _draw(folder / "memory.png", summary, f"Peak memory normalised to {base}",
          [(lambda c: c.get("maxrss_norm"), None, f"peak RSS (x {base})", "maxrss_norm"),
           (lambda c: c.get("minflt_norm"), None, f"minor page faults (x {base})",
            "minflt_norm")])
    written.append("memory.png")

    if any(c.get("frag") for c in summary["cells"].values()):
        _draw(folder / "frag.png", summary,
              "Fragmentation: peak anonymous memory, and peak RSS, over peak live bytes "
              "requested",
              [(lambda c: c.get("frag"), None, "peak anon / peak live bytes", "frag"),
               (lambda c: c.get("frag_rss"), None, "peak RSS / peak live bytes (seed 002)",
                "frag_rss")])
        written.append("frag.png")

    if any("instructions" in c for c in summary["cells"].values()):
        _draw(folder / "cache.png", summary, "Cachegrind: instructions and simulated cache "
              f"misses, normalised to {base}",
              [(lambda c, k=key: c.get(k + "_norm"), None, f"{label} (x {base})", key + "_norm")
               for key, label in (("instructions", "instructions"), ("l1_misses", "L1 misses"),
                                  ("ll_misses", "last-level misses"))])
        written.append("cache.png")
    return written


# ---- Markdown -----------------------------------------------------------------------------------

def _md_table(summary, fmt, geo_key) -> list:
    base = summary["baseline"]
    allocs = summary["allocators"]
    lines = ["| workload | " + " | ".join(allocs) + " |",
             "|---|" + "---:|" * len(allocs)]
    for w in summary["workloads"]:
        lines.append(f"| {_label(summary, w)} | " + " | ".join(
            fmt(summary["cells"][(w, a)], a == base) for a in allocs) + " |")
    if _shows_geomean(summary):
        geo = _geo(summary, geo_key)
        lines.append("| **geomean** | " + " | ".join(
            ("1.00x" if a == base and geo_key not in FRAG_KEYS else geo[a]) for a in allocs) + " |")
    return lines


def _md_heap(summary, meta) -> list:
    live = summary.get("live", {})
    if not live:
        return []
    lines = ["| workload | allocations | average size | bytes allocated | peak live bytes | "
             "peak live objects | total/max |", "|---|---:|---:|---:|---:|---:|---:|"]
    for w in summary["workloads"]:
        r = live.get(w)
        if not r or not r.get("peak_live_bytes"):
            continue
        n, total, peak = r.get("allocations") or 0, r.get("bytes_allocated") or 0, \
            r["peak_live_bytes"]
        avg = f"{total / n:,.0f} B" if n else "-"
        lines.append(f"| {w} | {n:,} | {avg} | {human_bytes(total)} | {human_bytes(peak)} | "
                     f"{r.get('peak_live_objects') or 0:,} | {total / peak:,.1f} |")
    return lines if len(lines) > 2 else []


def md_failures(title: str, cells, label) -> list:
    """A Markdown section listing the cells that did not end "ok", each with its status and
    the last line the program wrote on stderr; nothing when all did."""
    failures = [c for c in cells if c["status"] != "ok"]
    if not failures:
        return []
    out = [f"## {title}", ""]
    for c in failures:
        detail = (c.get("failure") or "").strip().splitlines()
        out.append(f"- {label(c)}: {c['status']}"
                   + (f" — `{detail[-1][:160]}`" if detail else ""))
    return out + [""]


def md_suite_heading(title: str, meta: dict, command: str) -> list:
    """The first lines of a suite's report.md (regions, hints): the title, the command that
    made it (`command` when meta.json does not say), the machine and the repetitions."""
    m = meta.get("machine", {})
    return [f"# {title}", "",
            f"Made by `{meta.get('command', command)}` on {meta.get('created', '?')}.", "",
            f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, Linux "
            f"{m.get('kernel', '?')}, {m.get('libc', '')}. Repetitions: "
            f"{meta.get('repetitions')} (interleaved; medians)"
            f"{'; quick (1/20 of the work)' if meta.get('quick') else ''}.", ""]


def md_allocators_and_notes(meta: dict) -> list:
    """The report's table of allocators, then the run's notes as quotes."""
    out = ["## Allocators", "", "| name | kind | library | version |", "|---|---|---|---|"]
    for a in meta.get("allocators", []):
        out.append(f"| {a['name']} | {a['kind']} | {a.get('library') or '(none: the C library)'}"
                   f" | {a.get('version', '')} |")
    out.append("")
    for note in meta.get("notes", []):
        out += [f"> {note}", ""]
    return out


def write_markdown(folder: Path, summary: dict, meta: dict, plots: list,
                   extra: list = ()) -> None:
    """report.md; `extra`: Markdown lines of a caller's own sections (`locus replay`'s),
    placed after the results and before the allocators."""
    base = summary["baseline"]
    m = meta.get("machine", {})
    out = ["# Allocator comparison", ""]
    out.append(f"Made by `{meta.get('command', 'locus compare')}` on {meta.get('created', '?')}.")
    out.append("")
    out.append(f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, Linux "
               f"{m.get('kernel', '?')}, {m.get('libc', '')}. Baseline: **{base}**. "
               f"Repetitions: {meta.get('repetitions')} (interleaved; medians).")
    out.append("")
    lines = summary["verdict"]["lines"]
    if lines:
        out += ["## Verdict", ""] + [f"- {line}" for line in lines] + [""]
    sections = {"Run time": "time.png", "Peak memory": "memory.png",
                "Fragmentation": "frag.png", "Instructions (cachegrind)": "cache.png"}
    for title, note, fmt, geo_key in tables(summary):
        out += [f"## {title}", ""]
        png = sections.get(title)
        if png in plots:
            out += [f"![{title}]({png})", ""]
        out += [f"_{note}._", ""] + _md_table(summary, fmt, geo_key) + [""]
    scaling = summary.get("scaling") or {}
    if scaling:
        out += ["## Two-thread scaling", "",
                f"_{SCALING_DEFINITION}. {scaling_machine_note(meta)}_", "",
                "| allocator | 1 thread | 2 threads | scaling |", "|---|---:|---:|---:|"]
        out += [f"| {a} | " + " | ".join(_scaling_cells(s)) + " |" for a, s in scaling.items()]
        out += [""]
    many = many_thread_table(summary)
    if many:
        header, rows = many
        out += ["## Many threads", "", f"_{MANY_DEFINITION}._", "",
                "| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
        out += ["| " + " | ".join(row) + " |" for row in rows]
        out += [""]
    heap = _md_heap(summary, meta)
    if heap:
        out += ["## The workloads' heaps", "",
                "_What each program asks of malloc, from one run under the tracer (glibc "
                "underneath; the largest process); the denominator of the fragmentation "
                "ratio._", ""] + heap + [""]
    out += md_failures("Failures", summary["cells"].values(),
                       lambda c: f"{c['workload']} under {c['allocator']}")
    out += list(extra)
    out += md_allocators_and_notes(meta)
    out += ["## Workloads", "", "| name | command | what |", "|---|---|---|"]
    root = meta.get("repository", "")
    for w in meta.get("workloads", []):
        cmd = " ".join(shlex.quote(x.replace(root + "/", "") if root else x) for x in w["argv"])
        env = " ".join(f"{k}={v}" for k, v in (w.get("env") or {}).items())
        cmd = ((env + " ") if env else "") + cmd
        out.append(f"| {w['name']} | `{cmd.replace('|', '&#124;')}` | "
                   f"{w.get('description', '')} |")
    out += ["", "## Method", "",
            "- Each workload runs under each allocator (LD_PRELOAD; nothing for glibc), "
            "repetitions interleaved: every repetition runs all allocators on a workload "
            "back to back, in a rotated order.",
            "- Times, peak RSS and page faults are the kernel's accounting of the child "
            "(wait4). Peak anonymous memory is sampled from /proc every 5 ms.",
            "- Fragmentation (seed 000 §4.4) = peak anonymous memory / peak live bytes "
            "requested, the latter measured once per workload with the tracer; seed 002's "
            "fragmentation = peak RSS (all the memory the process holds from the OS) / the "
            "same peak live bytes.",
            "- Cache figures come from one cachegrind run per allocator (simulated caches).",
            "",
            "Raw data: `runs.jsonl` (every run) and `meta.json`; derived: `summary.csv`, "
            "`summary.json`, the plots and this file. `locus report <folder>` re-draws them.",
            ""]
    (folder / "report.md").write_text("\n".join(out))


def write_all(folder: Path, summary: dict, meta: dict, rows: list, runs: list,
              plots: bool = True, extra_markdown: list = ()) -> list:
    folder = Path(folder)
    try:
        write_csv(folder / "runs.csv", runs)
        write_csv(folder / "summary.csv", rows)
        write_json(folder / "summary.json", summary, rows)
        written = plot_all(folder, summary) if plots else []
        write_markdown(folder, summary, meta, written, extra_markdown)
    except OSError as e:
        raise LabError(f"cannot write the report into {folder}: {e.strerror or e}") from None
    return ["report.md", "summary.csv", "summary.json", "runs.csv", *written]
