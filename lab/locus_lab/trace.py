"""Allocation traces: recording them with the C tracer, reading them, and their statistics.

The tracer (lab/tracer/locus_tracer.c, built to build/tools/liblocus_tracer.so) is preloaded
in front of whatever allocator is underneath. The binary format is docs/trace-format.md.
The statistics are those of seed 000 Table 1 and seed 004 Table 3, plus size and lifetime
histograms and the memory profile over allocation time (seed 004 Fig. 5).

Every statistic is computed on whole arrays (numpy): events are put in clock order, each
allocation is matched with the release of the same address that follows it, and live bytes
are a running sum of +size at allocations and -size at their releases.

The commands `locus trace` and `locus trace stats`, with their tables, are at the end.
"""
from __future__ import annotations

import json
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from . import allocators as alloc_mod
from . import plots, runner, suite
from .common import TRACER_SOURCE, LabError, Paths, built_or_compiled, find_paths, human_bytes

# ---- the format --------------------------------------------------------------------------

MAGIC = b"LOCUSTRC"
VERSION = 1
HEADER = struct.Struct("<8sIIIIQQQQQ16s")  # 80 bytes
BYTE_ORDER_MARK = 0x01020304
# On disk a record is three little-endian u64 words (docs/trace-format.md):
#   clock = seq | thread << 48;  block = addr | op << 48 | aux << 56;  request = size | site << 40
RAW = np.dtype([("clock", "<u8"), ("block", "<u8"), ("request", "<u8")])
# In memory, after unpacking:
RECORD = np.dtype([("seq", "<u8"), ("addr", "<u8"), ("size", "<u8"), ("site", "<u4"),
                   ("thread", "<u2"), ("op", "u1"), ("aux", "u1")])
assert HEADER.size == 80 and RAW.itemsize == 24
M48 = np.uint64((1 << 48) - 1)
SIZE_SATURATED = (1 << 40) - 1   # sizes of 1 TiB and more are stored as this


def unpack(raw: np.ndarray) -> np.ndarray:
    out = np.empty(len(raw), dtype=RECORD)
    out["seq"] = raw["clock"] & M48
    out["thread"] = raw["clock"] >> np.uint64(48)
    out["addr"] = raw["block"] & M48
    out["op"] = (raw["block"] >> np.uint64(48)) & np.uint64(0xFF)
    out["aux"] = raw["block"] >> np.uint64(56)
    out["size"] = raw["request"] & np.uint64(SIZE_SATURATED)
    out["site"] = raw["request"] >> np.uint64(40)
    return out


def pack(records: np.ndarray) -> np.ndarray:
    raw = np.empty(len(records), dtype=RAW)
    r = records
    raw["clock"] = (r["seq"] & M48) | (r["thread"].astype(np.uint64) << np.uint64(48))
    raw["block"] = ((r["addr"] & M48) | (r["op"].astype(np.uint64) << np.uint64(48))
                    | (r["aux"].astype(np.uint64) << np.uint64(56)))
    raw["request"] = (np.minimum(r["size"], np.uint64(SIZE_SATURATED))
                      | ((r["site"].astype(np.uint64) & np.uint64(0xFFFFFF)) << np.uint64(40)))
    return raw

OPS = {
    1: "malloc", 2: "calloc", 3: "realloc", 4: "realloc (release)", 5: "free",
    6: "posix_memalign", 7: "aligned_alloc", 8: "memalign", 9: "valloc", 10: "pvalloc",
    11: "reallocarray", 12: "operator new", 13: "operator new[]", 14: "operator delete",
    15: "operator delete[]", 16: "thread start",
}
OP = {name: code for code, name in OPS.items()}
ALLOC_OPS = np.array([1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13], dtype=np.uint8)
RELEASE_OPS = np.array([4, 5, 14, 15], dtype=np.uint8)
OP_THREAD = 16
IS_ALLOC = np.zeros(256, dtype=bool)
IS_ALLOC[ALLOC_OPS] = True
IS_RELEASE = np.zeros(256, dtype=bool)
IS_RELEASE[RELEASE_OPS] = True

SUMMARY_MAGIC = "locus-trace-summary 1"


@dataclass
class Trace:
    path: str
    header: dict
    records: np.ndarray


def write_trace(path, records, pid: int = 1, comm: str = "synthetic") -> None:
    """Writes a trace file (used by tests to build traces with known answers)."""
    arr = np.zeros(len(records), dtype=RECORD)
    for i, r in enumerate(records):
        arr[i] = tuple(r) if not isinstance(r, dict) else tuple(r[k] for k in RECORD.names)
    header = HEADER.pack(MAGIC, VERSION, HEADER.size, RAW.itemsize, BYTE_ORDER_MARK,
                         pid, 0, 0, 4096, 0, comm.encode()[:16])
    with open(path, "wb") as f:
        f.write(header)
        f.write(pack(arr).tobytes())


def read_header(path) -> dict:
    """The header of a trace file, with the number of whole records it holds."""
    try:
        with open(path, "rb") as f:
            raw = f.read(HEADER.size)
        size = os.path.getsize(path)
    except OSError as e:
        raise LabError(f"cannot read trace {path}: {e.strerror or e}") from None
    if len(raw) < HEADER.size or raw[:8] != MAGIC:
        if raw.startswith(SUMMARY_MAGIC.encode()):
            raise LabError(f"{path} is a summary, not an event trace")
        raise LabError(f"{path} is not a Locus trace (bad magic)")
    magic, version, header_size, record_size, bom, pid, ppid, start_ns, page, flags, comm = \
        HEADER.unpack(raw)
    if version != VERSION:
        raise LabError(f"{path}: trace format version {version} is not supported (this lab "
                       f"reads version {VERSION})")
    if bom != BYTE_ORDER_MARK or record_size != RAW.itemsize or header_size < HEADER.size:
        raise LabError(f"{path}: unexpected byte order or record size")
    count = max(0, (size - header_size) // record_size)
    return {"version": version, "pid": pid, "ppid": ppid, "start_ns": start_ns,
            "page_size": page, "flags": flags,
            "comm": comm.rstrip(b"\0").decode("utf-8", "replace"),
            "records": int(count), "header_size": header_size,
            "truncated_bytes": int(max(0, size - header_size) % record_size)}


def read_trace(path) -> Trace:
    header = read_header(path)
    count = header["records"]
    raw = np.fromfile(path, dtype=RAW, count=count, offset=header.pop("header_size")) \
        if count > 0 else np.zeros(0, dtype=RAW)
    return Trace(str(path), header, unpack(raw))


# ---- a process tree's traces ---------------------------------------------------------------

def process_table(base) -> list:
    """One row per process of a traced tree (FILE and FILE.<pid>): file, pid, ppid, comm and
    records, the busiest first (ties: the main file first). Unreadable files are left out."""
    rows = []
    for i, f in enumerate(trace_files(Path(base))):
        try:
            h = read_header(f)
        except LabError:
            continue
        rows.append({"file": str(f), "main": i == 0 and Path(f) == Path(base),
                     "pid": h["pid"], "ppid": h["ppid"], "comm": h["comm"],
                     "records": h["records"]})
    rows.sort(key=lambda r: (-r["records"], not r["main"]))
    return rows


def process_trace(path, pid: int | None = None) -> str:
    """The trace of one process of a tree traced into `path` (FILE and FILE.<pid>): with
    `pid`, that process's; without, the busiest process's (the most records; FILE on a tie),
    which is the program itself when a wrapper (a shell script, a shim, a compiler driver)
    started it. A file with no FILE.<pid> beside it is returned as it is."""
    rows = process_table(Path(path))
    if pid is not None:
        match = [r for r in rows if r["pid"] == pid]
        if not match:
            known = ", ".join(str(r["pid"]) for r in rows) or "none"
            raise LabError(f"no trace of process {pid} in {path} (processes traced: {known})")
        return match[0]["file"]
    return rows[0]["file"] if len(rows) > 1 else str(path)


def read_summary(path) -> dict:
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise LabError(f"cannot read {path}: {e.strerror or e}") from None
    if not lines or lines[0].strip() != SUMMARY_MAGIC:
        raise LabError(f"{path} is not a trace summary")
    out = {}
    for line in lines[1:]:
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


# ---- the tracer library ------------------------------------------------------------------

def tracer_library(paths: Paths) -> Path:
    """build/tools/liblocus_tracer.so when it is at least as new as the source; otherwise
    the source compiled with cc into the lab's cache folder (keyed by the source's hash)."""
    return built_or_compiled(paths.tools / "liblocus_tracer.so", TRACER_SOURCE, "tracer",
                             ["-O2", "-g", "-fPIC", "-shared", "-fexceptions", "-pthread",
                              "-Wall"], ["-ldl"])


def trace_files(out: Path) -> list:
    """The trace of the first process and those of its children (FILE.<pid>)."""
    files = [out] if out.exists() else []
    pattern = re.compile(re.escape(out.name) + r"\.\d+")
    if out.parent.is_dir():
        files += sorted(p for p in out.parent.iterdir() if pattern.fullmatch(p.name))
    return files


def clear_trace_files(out: Path) -> None:
    for p in trace_files(out):
        p.unlink()


def trace_environment(base: dict, tracer: Path, out: Path, allocator=None,
                      summary: bool = False) -> dict:
    env = dict(base)
    preload = [str(tracer)]
    if allocator is not None and allocator.library:
        preload.append(allocator.library)
    if env.get("LD_PRELOAD"):
        preload.append(env["LD_PRELOAD"])
    env["LD_PRELOAD"] = " ".join(preload)
    env["LOCUS_TRACE_FILE"] = str(out)
    env["LOCUS_TRACE_MODE"] = "summary" if summary else "events"
    return env


# ---- statistics ----------------------------------------------------------------------------

SIZE_EDGES = [8 << i for i in range(18)]  # 8 B .. 1 MiB


def _size_label(hi: int | None) -> str:
    if hi is None:
        return f"> {_size_label(SIZE_EDGES[-1])[3:]}"
    for unit, f in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if hi >= f:
            return f"<= {hi // f} {unit}"
    return f"<= {hi} B"


def size_histogram(sizes: np.ndarray) -> list:
    edges = np.array(SIZE_EDGES, dtype=np.uint64)
    bucket = np.searchsorted(edges, sizes, side="left")  # sizes <= edges[i] -> i
    counts = np.bincount(bucket, minlength=len(edges) + 1)
    volume = np.bincount(bucket, weights=sizes.astype(np.float64), minlength=len(edges) + 1)
    total = max(1, len(sizes))
    rows = []
    for i, c in enumerate(counts):
        hi = SIZE_EDGES[i] if i < len(SIZE_EDGES) else None
        rows.append({"bucket": _size_label(hi), "max_bytes": hi, "objects": int(c),
                     "percent": 100.0 * c / total, "bytes": int(volume[i])})
    return rows


def lifetime_histogram(lifetimes: np.ndarray, never_freed: int) -> list:
    """Buckets 0, 1, 2-3, 4-7, ... in allocations (the allocation clock)."""
    rows = []
    total = max(1, len(lifetimes) + never_freed)
    if len(lifetimes):
        bucket = np.where(lifetimes == 0, 0, np.floor(np.log2(np.maximum(lifetimes, 1))) + 1)
        counts = np.bincount(bucket.astype(np.int64))
    else:
        counts = np.zeros(1, dtype=np.int64)
    for i, c in enumerate(counts):
        if i == 0:
            label = "0"
        elif i == 1:
            label = "1"
        else:
            label = f"{1 << (i - 1)}-{(1 << i) - 1}"
        rows.append({"bucket": label, "objects": int(c), "percent": 100.0 * c / total})
    rows.append({"bucket": "never freed", "objects": int(never_freed),
                 "percent": 100.0 * never_freed / total})
    return rows


def compute_stats(records: np.ndarray, profile_points: int = 1000, top_sites: int = 10) -> dict:
    """Statistics of one process's trace. Definitions (docs/lab.md):
    - an object is what one successful allocation call returns; realloc ends the old object
      and starts a new one;
    - the allocation clock counts allocations; an object's lifetime is the number of
      allocations made between its birth and its release;
    - live bytes are the bytes requested by objects not yet released."""
    op_all = records["op"]
    threads = int(np.count_nonzero(op_all == OP_THREAD))
    keep = op_all != OP_THREAD
    seq = records["seq"][keep]
    # Put events in clock order (each thread's buffer is in order; a single-threaded trace
    # usually is already). Only the fields needed are sorted, not whole records.
    order = None if len(seq) < 2 or bool(np.all(seq[1:] > seq[:-1])) else \
        np.argsort(seq, kind="stable")

    def field(name):
        values = records[name][keep]
        return values if order is None else values[order]

    op, addr, size, site = field("op"), field("addr"), field("size"), field("site")
    n = len(op)

    is_alloc_call = IS_ALLOC[op]
    is_alloc = is_alloc_call & (addr != 0)
    failed = int(np.count_nonzero(is_alloc_call & (addr == 0)))
    is_release = IS_RELEASE[op] & (addr != 0)

    # Match each allocation with the release of its address that comes next in time: a
    # stable sort by address keeps each address's events in time order.
    pos = np.nonzero(is_alloc | is_release)[0]
    by_addr = pos[np.argsort(addr[pos], kind="stable")]
    same = addr[by_addr[1:]] == addr[by_addr[:-1]]
    pair = same & is_alloc[by_addr[:-1]] & is_release[by_addr[1:]]
    born, died = by_addr[:-1][pair], by_addr[1:][pair]

    sizes = size[is_alloc]
    delta_bytes = np.zeros(n, dtype=np.int64)
    delta_bytes[is_alloc] = sizes.astype(np.int64)
    delta_bytes[died] -= size[born].astype(np.int64)
    delta_objects = is_alloc.astype(np.int64)
    delta_objects[died] -= 1
    live = np.cumsum(delta_bytes)
    live_objects = np.cumsum(delta_objects)
    clock = np.cumsum(is_alloc.astype(np.int64))
    lifetimes = clock[died] - clock[born]

    total_objects = int(np.count_nonzero(is_alloc))
    total_bytes = int(sizes.sum(dtype=np.uint64)) if total_objects else 0
    peak_bytes = int(live.max()) if n else 0
    peak_objects = int(live_objects.max()) if n else 0
    never_freed = total_objects - len(born)
    releases = int(np.count_nonzero(is_release))

    calls = {OPS.get(int(code), f"op {code}"): int(c)
             for code, c in enumerate(np.bincount(op, minlength=17)) if c and code != OP_THREAD}

    alloc_sites = site[is_alloc]
    sites, site_counts = np.unique(alloc_sites, return_counts=True)
    order = np.argsort(-site_counts, kind="stable")[:top_sites]
    site_bytes = {}
    if total_objects:
        idx = np.searchsorted(sites, alloc_sites)
        volume = np.bincount(idx, weights=sizes.astype(np.float64), minlength=len(sites))
        site_bytes = {int(sites[i]): int(volume[i]) for i in order}
    top = [{"site": f"{int(sites[i]):06x}", "objects": int(site_counts[i]),
            "bytes": site_bytes.get(int(sites[i]), 0),
            "average_size": site_bytes.get(int(sites[i]), 0) / max(1, int(site_counts[i]))}
           for i in order]

    # Memory profile: live bytes over allocation time, the maximum within each step so the
    # peak survives the down-sampling.
    profile = {"clock": [], "live_bytes": []}
    if n:
        steps = min(profile_points, n)
        bounds = np.linspace(0, n, steps + 1).astype(np.int64)
        bounds = np.unique(bounds)
        starts = bounds[:-1]
        profile["clock"] = [int(x) for x in clock[bounds[1:] - 1]]
        profile["live_bytes"] = [int(x) for x in np.maximum.reduceat(live, starts)]

    return {
        "total_objects": total_objects,
        "max_objects_in_use": peak_objects,
        "average_size": total_bytes / total_objects if total_objects else 0.0,
        "total_bytes": total_bytes,
        "max_bytes_in_use": peak_bytes,
        "total_over_max": total_bytes / peak_bytes if peak_bytes else 0.0,
        "releases": releases,
        "unmatched_releases": releases - len(died),
        "failed_allocations": failed,
        "live_objects_at_exit": int(live_objects[-1]) if n else 0,
        "live_bytes_at_exit": int(live[-1]) if n else 0,
        "threads": threads,
        "call_sites": int(len(sites)),
        "calls": calls,
        "lifetime": {
            "median": float(np.median(lifetimes)) if len(lifetimes) else None,
            "mean": float(lifetimes.mean()) if len(lifetimes) else None,
            "p90": float(np.percentile(lifetimes, 90)) if len(lifetimes) else None,
            "never_freed": int(never_freed),
        },
        "size_histogram": size_histogram(sizes),
        "lifetime_histogram": lifetime_histogram(lifetimes, never_freed),
        "top_sites": top,
        "profile": profile,
    }


def file_stats(path) -> dict:
    t = read_trace(path)
    stats = compute_stats(t.records)
    stats["file"] = str(path)
    stats["header"] = t.header
    return stats


# ---- the commands: locus trace, locus trace stats -----------------------------------------

QUICK_STATS_LIMIT = 5_000_000  # records; `locus trace` summarises smaller traces at once


def cmd_trace(args, command: list, console: Console) -> int:
    if not command:
        raise LabError("give the program to trace after --, e.g. locus trace -- ls -l")
    paths = find_paths(args.build_dir)
    workload = suite.command_workload(command)
    allocator = None
    if args.allocator:
        allocator = alloc_mod.select(alloc_mod.discover(paths), args.allocator)[0]
    tracer = tracer_library(paths)
    out = Path(args.output).resolve()
    if out.is_dir():
        raise LabError(f"{args.output} is a folder; give a file name")
    if not out.parent.is_dir():
        raise LabError(f"no such folder: {out.parent}")
    clear_trace_files(out)
    env = trace_environment(dict(os.environ), tracer, out, allocator, summary=args.summary)
    res = runner.run_once(workload.argv, env, passthrough=True)
    files = trace_files(out)
    err = Console(stderr=True, highlight=False)
    err.print(f"[bold]locus trace[/bold]: {workload.description}: {res.status}, "
              f"{res.wall_s:.2f} s, peak RSS {human_bytes(res.maxrss_kib * 1024)}")
    if not files:
        err.print("[red]no trace was written[/red] (a static program, or one that "
                  "bypasses the dynamic loader, cannot be traced)")
        return 1
    if args.summary:
        for f in files:
            s = read_summary(f)
            err.print(f"{f}: peak live {human_bytes(s.get('peak_live_bytes', 0))}, "
                      f"{s.get('allocations', 0):,} allocations")
    else:
        rows = process_table(out)
        if len(rows) > 1:
            print_processes(err, rows, f"{len(rows)} processes traced, busiest first")
        shown = Path(process_trace(out))
        t = read_trace(shown)
        err.print(f"wrote {shown} ({t.header['records']:,} records, "
                  f"{human_bytes(shown.stat().st_size)}; process {t.header['pid']} "
                  f"({t.header['comm']}))" + (f"; {len(files) - 1} more process trace(s) "
                                               f"{out.name}.<pid>" if len(files) > 1 else ""))
        if len(t.records) <= QUICK_STATS_LIMIT:  # larger traces take a while: on request
            stats = compute_stats(t.records, profile_points=10)
            err.print(f"  objects {stats['total_objects']:,}, max in use "
                      f"{stats['max_objects_in_use']:,}, average size "
                      f"{stats['average_size']:.0f} B, max bytes in use "
                      f"{human_bytes(stats['max_bytes_in_use'])}, total/max "
                      f"{stats['total_over_max']:.1f}")
        err.print(f"  statistics: locus trace stats {args.output}"
                  + (" [--pid PID]" if len(rows) > 1 else ""))
    if res.ok:
        return 0
    return res.exit_code if res.exit_code else 1


PROCESSES_SHOWN = 15


def print_processes(console: Console, rows: list, title: str) -> None:
    """The processes of a traced tree (process_table), the busiest first."""
    t = Table(title=title, title_justify="left", caption_justify="left",
              caption=f"{sum(r['records'] for r in rows):,} records in all")
    for col, just in (("pid", "right"), ("parent", "right"), ("program", "left"),
                      ("records", "right"), ("file", "left")):
        t.add_column(col, justify=just)
    for r in rows[:PROCESSES_SHOWN]:
        t.add_row(str(r["pid"]), str(r["ppid"]), r["comm"], f"{r['records']:,}",
                  Path(r["file"]).name)
    if len(rows) > PROCESSES_SHOWN:
        rest = rows[PROCESSES_SHOWN:]
        t.add_row("", "", f"{len(rest)} more", f"{sum(r['records'] for r in rest):,}", "")
    console.print(t)


def cmd_trace_stats(args, console: Console) -> int:
    """Statistics of one process. Given the base name of a tree (FILE with FILE.<pid>
    beside it), the processes are listed and the one shown is the busiest (the program a
    wrapper started), or --pid's."""
    chosen = process_trace(args.file, args.pid)
    rows = process_table(args.file)
    stats = dict(file_stats(chosen))
    if len(rows) > 1:
        stats["processes"] = rows
    if args.plot:
        plots.plot_trace(stats, args.plot)
    if args.json:
        print(json.dumps(stats, indent=2))
        return 0
    if len(rows) > 1:
        print_processes(console, rows, f"{args.file}: {len(rows)} processes traced, busiest "
                        f"first (--pid PID for another)")
        console.print(f"showing process {stats['header']['pid']} ({stats['header']['comm']}): "
                      f"{chosen}")
    print_trace_stats(console, stats, args.top)
    if args.plot:
        console.print(f"wrote {args.plot}")
    return 0


def _bar(pct: float, width: int = 30) -> str:
    n = int(round(pct / 100 * width))
    return "#" * n


def print_trace_stats(console: Console, s: dict, top: int = 10) -> None:
    h = s.get("header", {})
    console.print(f"[bold]{s['file']}[/bold]: process {h.get('pid')} ({h.get('comm')}), "
                  f"{h.get('records', 0):,} records, {s['threads']} thread(s)")
    t = Table(title="Allocation statistics (seed 000 Table 1, seed 004 Table 3)",
              title_justify="left", show_header=False)
    t.add_column("statistic")
    t.add_column("value", justify="right")
    rows = [
        ("Total objects", f"{s['total_objects']:,}"),
        ("Max objects in use", f"{s['max_objects_in_use']:,}"),
        ("Average object size (bytes)", f"{s['average_size']:,.1f}"),
        ("Total memory (bytes)", f"{s['total_bytes']:,}"),
        ("Max in use (bytes)", f"{s['max_bytes_in_use']:,}"),
        ("Total/max", f"{s['total_over_max']:,.1f}"),
        ("Releases (free, delete, realloc)", f"{s['releases']:,}"),
        ("Live at exit", f"{s['live_objects_at_exit']:,} objects, "
                         f"{s['live_bytes_at_exit']:,} bytes"),
        ("Failed allocations", f"{s['failed_allocations']:,}"),
        ("Releases of unknown blocks", f"{s['unmatched_releases']:,}"),
        ("Allocation call sites", f"{s['call_sites']:,}"),
    ]
    lt = s["lifetime"]
    if lt["median"] is not None:
        rows.append(("Lifetime, in allocations (median / mean / p90)",
                     f"{lt['median']:,.0f} / {lt['mean']:,.1f} / {lt['p90']:,.0f}"))
    for k, v in rows:
        t.add_row(k, v)
    console.print(t)

    calls = Table(title="Calls", title_justify="left")
    calls.add_column("function")
    calls.add_column("calls", justify="right")
    for name, n in s["calls"].items():
        calls.add_row(name, f"{n:,}")
    console.print(calls)

    sizes = Table(title="Object sizes (bytes requested)", title_justify="left")
    for col, just in (("size", "left"), ("objects", "right"), ("%", "right"),
                      ("bytes", "right"), ("", "left")):
        sizes.add_column(col, justify=just)
    for row in s["size_histogram"]:
        if row["objects"]:
            sizes.add_row(row["bucket"], f"{row['objects']:,}", f"{row['percent']:.1f}",
                          f"{row['bytes']:,}", _bar(row["percent"]))
    console.print(sizes)

    life = Table(title="Lifetimes (allocations between birth and release)",
                 title_justify="left")
    for col, just in (("lifetime", "left"), ("objects", "right"), ("%", "right"),
                      ("", "left")):
        life.add_column(col, justify=just)
    for row in s["lifetime_histogram"]:
        if row["objects"]:
            life.add_row(row["bucket"], f"{row['objects']:,}", f"{row['percent']:.1f}",
                         _bar(row["percent"]))
    console.print(life)

    if s["top_sites"]:
        sites = Table(title=f"Busiest call sites (of {s['call_sites']:,})", title_justify="left")
        for col, just in (("site id", "left"), ("objects", "right"), ("bytes", "right"),
                          ("average size", "right")):
            sites.add_column(col, justify=just)
        for row in s["top_sites"][:top]:
            sites.add_row(row["site"], f"{row['objects']:,}", f"{row['bytes']:,}",
                          f"{row['average_size']:,.1f}")
        console.print(sites)
