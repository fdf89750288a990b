"""`locus paging`: page-level locality of a program under each allocator (seed 000 §4.6), and
object drag (seed 004 §6); `locus pressure`: runs in a memory-limited cgroup where the machine
offers one.

The references come from valgrind's lackey tool (`--trace-mem=yes`), streamed through a pipe
into build/tools/locus_pages (lab/paging/locus_pages.c), which keeps page numbers and computes
LRU stack distances in one pass: the miss curve for every memory size, and the prefetchability
of the misses at chosen sizes. The allocator under study is preloaded in valgrind's own
environment; valgrind hands LD_PRELOAD on to the program. With --drag the marking preload
(build/tools/liblocus_marks.so) is loaded first and prints allocation marks into the log.
"""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from . import allocators as alloc_mod
from .common import LAB_DIR, LabError, Paths, built_or_compiled, find_paths, human_bytes
from .plots import pyplot
from .session import base_environment, default_output, format_duration

PAGES_SOURCE = LAB_DIR / "paging" / "locus_pages.c"
MARKS_SOURCE = LAB_DIR / "paging" / "locus_marks.c"
PAGE = 4096
DEFAULT_SIZES = "1M,4M,16M"
DEFAULT_ALLOCATORS = "locus-vam,locus-phk,glibc"


@dataclass
class PagingOptions:
    command: list
    allocators: str | None = None
    sizes: str = DEFAULT_SIZES
    drag: bool = False
    output: str | None = None
    timeout: float = 3600.0
    plots: bool = True
    build_dir: str | None = None
    argv: list = field(default_factory=list)


def reducer(paths: Paths) -> Path:
    return built_or_compiled(paths.tools / "locus_pages", PAGES_SOURCE, "page reducer",
                             ["-O2", "-std=gnu11", "-Wall"])


def marks_library(paths: Paths) -> Path:
    return built_or_compiled(paths.tools / "liblocus_marks.so", MARKS_SOURCE, "marking preload",
                             ["-O2", "-std=gnu11", "-shared", "-fPIC", "-Wall"], ["-ldl"])


def parse_sizes(text: str) -> list:
    """Memory sizes in pages: `512` (pages), `2M`, `512K`, `1G` (bytes, rounded up)."""
    sizes = []
    for item in (s.strip() for s in text.split(",") if s.strip()):
        m = re.fullmatch(r"(\d+)([KMG]?)(i?B)?", item, re.IGNORECASE)
        if not m:
            raise LabError(f"--sizes: not a size: {item} (pages, or bytes as 512K, 4M, 1G)")
        n, unit = int(m.group(1)), m.group(2).upper()
        if unit:
            n = -(-n * {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[unit] // PAGE)
        if n < 1:
            raise LabError(f"--sizes: must be at least one page: {item}")
        sizes.append(n)
    if not 1 <= len(sizes) <= 8:
        raise LabError("--sizes: give one to eight sizes")
    return sizes


def parse_reducer(text: str) -> dict:
    """locus_pages's output as a dict: refs, pages, curve, prefetch, objects, unfreed."""
    out = {"prefetch": [], "objects": [], "unfreed": []}
    for line in text.splitlines():
        word, _, rest = line.partition(" ")
        nums = [int(x) for x in rest.split()]
        if word in ("refs", "pages"):
            out[word] = nums[0]
        elif word == "curve":
            out["curve"] = nums
        elif word == "prefetch":
            out["prefetch"].append({"pages": nums[0], "misses": nums[1],
                                    "prefetchable": nums[2]})
        elif word == "o":
            out["objects"].append(nums)
        elif word == "u":
            out["unfreed"].append(nums)
    return out


def misses_at(curve: list, cold: int, pages: int) -> int:
    return curve[pages] if pages < len(curve) else cold


def drag_profile(objects: list, unfreed: list) -> dict:
    """Seed 004's drag from (t_alloc, t_last, t_free, size) of freed objects and (t_alloc,
    t_last, size) of unfreed ones (ending at the last allocation time): the memory held until
    the program frees (`live`) and the memory needed if each object were freed at its last
    access (`needed`), as step curves over allocation time, and total drag, the ratio of
    their areas (bytes x allocation time)."""
    end = max([o[2] for o in objects] + [u[0] for u in unfreed] + [0])
    spans = [(a, f, s, l) for a, l, f, s in objects] + [(a, end, s, l) for a, l, s in unfreed]
    live_area = sum(s * (f - a) for a, f, s, _ in spans)
    needed_area = sum(s * (min(l, f) - a) for a, f, s, l in spans)
    events_live, events_needed = {}, {}
    for a, f, s, l in spans:
        events_live[a] = events_live.get(a, 0) + s
        events_live[f] = events_live.get(f, 0) - s
        events_needed[a] = events_needed.get(a, 0) + s
        events_needed[min(l, f)] = events_needed.get(min(l, f), 0) - s

    def curve(events):
        xs, ys, level = [], [], 0
        for t in sorted(events):
            level += events[t]
            xs.append(t)
            ys.append(level)
        return xs, ys

    lx, ly = curve(events_live)
    nx, ny = curve(events_needed)
    return {"objects": len(spans), "live_area": live_area, "needed_area": needed_area,
            "drag": live_area / needed_area if needed_area else None,
            "peak_live": max(ly, default=0), "peak_needed": max(ny, default=0),
            "live": [lx, ly], "needed": [nx, ny]}


def lackey_run(paths: Paths, command: list, env: dict, sizes: list, drag: bool,
               timeout: float) -> tuple[dict, float]:
    """One lackey run of `command`, its log reduced by locus_pages; (result, seconds)."""
    if not shutil.which("valgrind"):
        raise LabError("valgrind not found (apt-get install valgrind)")
    tool = reducer(paths)
    args = [str(tool), "--sizes", ",".join(map(str, sizes))] + (["--drag"] if drag else [])
    read_end, write_end = os.pipe()
    started = time.monotonic()
    # The reducer writes to a file: with --drag it prints as it reads, and a pipe nobody
    # reads yet would stop it and, through the log pipe, valgrind.
    result = tempfile.TemporaryFile(mode="w+")
    red = subprocess.Popen(args, stdin=read_end, stdout=result)
    os.close(read_end)
    vg = ["valgrind", "--tool=lackey", "--trace-mem=yes", f"--log-fd={write_end}",
          "--trace-children=yes", *command]
    try:
        prog = subprocess.run(vg, env=env, pass_fds=(write_end,), stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        red.kill()
        red.wait()
        raise LabError(f"{command[0]} under lackey took longer than {timeout:.0f} s") from None
    finally:
        os.close(write_end)
    red.wait()
    result.seek(0)
    out = result.read()
    result.close()
    seconds = time.monotonic() - started
    if red.returncode != 0:
        raise LabError(f"the page reducer failed (status {red.returncode})")
    if prog.returncode != 0:
        tail = (prog.stderr.strip().splitlines() or ["?"])[-1]
        raise LabError(f"{command[0]} exited with status {prog.returncode} under lackey: {tail}")
    return parse_reducer(out), seconds


def native_seconds(command: list, env: dict, timeout: float) -> float:
    started = time.monotonic()
    subprocess.run(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=timeout)
    return time.monotonic() - started


def run_paging(opts: PagingOptions, console: Console) -> int:
    if not opts.command:
        raise LabError("give the program after --, e.g. locus paging -- build/bench/linked")
    paths = find_paths(opts.build_dir)
    sizes = parse_sizes(opts.sizes)
    chosen = alloc_mod.select(alloc_mod.discover(paths), opts.allocators or DEFAULT_ALLOCATORS)
    base_env, _ = base_environment()
    marks = str(marks_library(paths)) if opts.drag else None
    out = Path(opts.output) if opts.output else default_output()
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    runs = []
    for a in chosen:
        env = a.environment(base_env)
        if marks:
            env["LD_PRELOAD"] = marks + (" " + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
        native = native_seconds(opts.command, a.environment(base_env), opts.timeout)
        console.print(f"{a.name}: lackey run ({native:.2f} s natively) ...")
        try:
            res, seconds = lackey_run(paths, opts.command, env, sizes, opts.drag, opts.timeout)
        except LabError as e:
            # A crash or timeout under one allocator is its result; the others still run.
            console.print(f"  [red]failed[/red]: {e}")
            runs.append({"allocator": a.name, "error": str(e), "native_s": native})
            continue
        entry = {"allocator": a.name, "refs": res["refs"], "pages": res["pages"],
                 "curve": res["curve"], "prefetch": res["prefetch"], "lackey_s": seconds,
                 "native_s": native, "slowdown": seconds / native if native > 0 else None}
        if opts.drag:
            entry["drag"] = drag_profile(res["objects"], res["unfreed"])
        runs.append(entry)
        console.print(f"  {res['refs']:,} page references, {res['pages']:,} pages "
                      f"({human_bytes(res['pages'] * PAGE)}), {seconds:.1f} s under lackey"
                      + (f" ({entry['slowdown']:.0f}x)" if entry["slowdown"] else ""))
    meta = {"command": "locus " + " ".join(opts.argv), "program": opts.command,
            "sizes_pages": sizes, "page_bytes": PAGE, "buffer_pages": 256, "cluster_pages": 8}
    (out / "paging.json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=1))
    files = ["paging.json", "paging.csv", "paging.md"]
    measured = [r for r in runs if "error" not in r]
    write_csv(out / "paging.csv", measured, sizes)
    if opts.plots and measured:
        files += draw(out, measured, sizes)
    (out / "paging.md").write_text("\n".join(markdown(meta, runs)) + "\n")
    for line in markdown(meta, runs):
        if line.startswith("|"):
            console.print(line)
    console.print(f"\nwrote {out}/: " + ", ".join(files)
                  + f"; took {format_duration(time.monotonic() - started)}")
    return 0 if measured else 1


def write_csv(path: Path, runs: list, sizes: list):
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["allocator", "memory_pages", "misses", "prefetchable"])
        for r in runs:
            pre = {p["pages"]: p["prefetchable"] for p in r["prefetch"]}
            for m, misses in enumerate(r["curve"]):
                w.writerow([r["allocator"], m, misses, pre.get(m, "")])
            for m in sizes:
                if m >= len(r["curve"]):
                    w.writerow([r["allocator"], m, r["pages"], pre.get(m, "")])


def markdown(meta: dict, runs: list) -> list:
    lines = [f"## Page-level locality: `{' '.join(meta['program'])}`", "",
             f"`{meta['command']}`. Data references of the whole process (heap, stack, "
             "globals) from valgrind's lackey at 4 KiB pages, consecutive repeats of a page "
             "dropped; LRU misses include the cold (first) ones; prefetchability: the LRU "
             "misses at that size fed to a 256-page buffer filled in aligned 8-page clusters "
             "(seed 000 §4.6).", ""]
    sizes = meta["sizes_pages"]
    head = ["allocator", "references", "pages touched"]
    head += [f"misses @ {human_bytes(s * PAGE)}" for s in sizes]
    head += [f"prefetchable @ {human_bytes(s * PAGE)}" for s in sizes]
    head += ["lackey slowdown"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in runs:
        if "error" in r:
            lines.append(f"| {r['allocator']} | failed: {r['error'].replace('|', '/')} |"
                         + " |" * (len(head) - 2))
            continue
        row = [r["allocator"], f"{r['refs']:,}", f"{r['pages']:,}"]
        row += [f"{misses_at(r['curve'], r['pages'], s):,}" for s in sizes]
        row += [f"{100 * p['prefetchable'] / p['misses']:.0f}%" if p["misses"] else "-"
                for p in r["prefetch"]]
        row += [f"{r['slowdown']:.0f}x" if r.get("slowdown") else "-"]
        lines.append("| " + " | ".join(row) + " |")
    if any("drag" in r for r in runs):
        lines += ["", "Object drag (seed 004): memory held until the program's frees over "
                  "memory needed were each object freed at its last access (areas over "
                  "allocation time, references inside the allocator not counted).", "",
                  "| allocator | objects | total drag | peak live | peak needed |",
                  "|---|---|---|---|---|"]
        for r in runs:
            d = r.get("drag")
            if d:
                lines.append(f"| {r['allocator']} | {d['objects']:,} | "
                             + (f"{d['drag']:.2f}" if d["drag"] else "-")
                             + f" | {human_bytes(d['peak_live'])} | "
                             f"{human_bytes(d['peak_needed'])} |")
    return lines


def draw(out: Path, runs: list, sizes: list) -> list:
    plt = pyplot()
    files = []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in runs:
        xs = [m * PAGE / (1 << 20) for m in range(1, len(r["curve"]))]
        ax.plot(xs, r["curve"][1:], label=r["allocator"])
    ax.set_xlabel("memory (MiB)")
    ax.set_ylabel("page misses (LRU)")
    ax.set_yscale("log")
    _finish(plt, fig, ax, "LRU page-miss curves", out / "paging-misses.png", files)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    width = 0.8 / max(1, len(runs))
    for i, r in enumerate(runs):
        xs = [k + i * width for k in range(len(sizes))]
        pre = [p["prefetchable"] for p in r["prefetch"]]
        non = [p["misses"] - p["prefetchable"] for p in r["prefetch"]]
        bars = ax.bar(xs, non, width, label=f"{r['allocator']} not prefetchable")
        ax.bar(xs, pre, width, bottom=non, color=bars[0].get_facecolor(), alpha=0.4,
               label=f"{r['allocator']} prefetchable")
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(sizes))])
    ax.set_xticklabels([human_bytes(s * PAGE) for s in sizes])
    ax.set_xlabel("memory")
    ax.set_ylabel("page misses")
    _finish(plt, fig, ax, "Swap prefetchability", out / "paging-prefetch.png", files)

    drags = [r for r in runs if r.get("drag")]
    if drags:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for r in drags:
            d = r["drag"]
            line, = ax.step([x / (1 << 20) for x in d["live"][0]],
                            [y / (1 << 20) for y in d["live"][1]], where="post",
                            label=f"{r['allocator']}: live until freed")
            ax.step([x / (1 << 20) for x in d["needed"][0]],
                    [y / (1 << 20) for y in d["needed"][1]], where="post", linestyle="--",
                    color=line.get_color(), label=f"{r['allocator']}: freed at last use")
        ax.set_xlabel("allocation time (MiB allocated)")
        ax.set_ylabel("memory (MiB)")
        _finish(plt, fig, ax, "Object drag", out / "paging-drag.png", files)
    return files


def _finish(plt, fig, ax, title: str, path: Path, files: list):
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    files.append(path.name)
