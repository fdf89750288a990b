"""`locus sites`: per-call-site statistics of a program under a Locus library.

Runs COMMAND with LD_PRELOAD=<library>, LOCUS_SITES=1 and LOCUS_SITES_FILE=<a temporary
folder>/sites.%p.json: every process of the run writes the JSON of locus_sites_json there at exit
(%p: its process id; docs/sites.md). The process that allocated the most bytes is shown (the
command itself, unless it only starts others): its top sites as a table; --json keeps its JSON.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .common import LabError, find_paths

DEFAULT_LIBRARY = "liblocus.so"


def resolve_library(name: str | None, build_dir: str | None) -> Path:
    """A library by path, by file name in build/lib, or by variant (lf -> liblocus-lf.so)."""
    name = name or DEFAULT_LIBRARY
    if "/" in name:
        path = Path(name)
    else:
        lib = find_paths(build_dir).lib
        candidates = [lib / name, lib / f"liblocus-{name}.so", lib / f"lib{name}.so"]
        path = next((c for c in candidates if c.is_file()), candidates[0])
    if not path.is_file():
        raise LabError(f"library not found: {path} (build it with `make`)")
    return path.resolve()


def run_sites(command: list, library: Path, timeout: float | None = None) -> tuple[dict, int]:
    """Runs command under library with sites counted; returns (the JSON, exit status)."""
    if not command:
        raise LabError("give the program after --, e.g. locus sites -- ls -l")
    if shutil.which(command[0]) is None:
        raise LabError(f"cannot run {command[0]}: not found or not executable")
    with tempfile.TemporaryDirectory(prefix="locus-sites-") as tmp:
        out = Path(tmp) / "sites.%p.json"
        env = dict(os.environ)
        previous = env.get("LD_PRELOAD")
        env["LD_PRELOAD"] = str(library) + (" " + previous if previous else "")
        env["LOCUS_SITES"] = "1"
        env["LOCUS_SITES_FILE"] = str(out)
        try:
            proc = subprocess.run(command, env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, timeout=timeout)
        except OSError as e:
            raise LabError(f"cannot run {command[0]}: {e.strerror or e}") from None
        except subprocess.TimeoutExpired:
            raise LabError(f"{command[0]} did not finish in {timeout} s") from None
        written = sorted(Path(tmp).glob("sites.*.json"))
        if not written:
            raise LabError(f"{command[0]} wrote no site statistics (exit status "
                           f"{proc.returncode}; is {library.name} a Locus library?)")
        runs = []
        for f in written:
            try:
                runs.append(json.loads(f.read_text()))
            except ValueError as e:
                raise LabError(f"the site statistics of {f.name} are not valid JSON: {e}") from None
    data = max(runs, key=lambda d: sum(s.get("bytes", 0) for s in d.get("sites", [])))
    data["processes"] = len(runs)
    return data, proc.returncode


def caller(site: dict) -> str:
    if site.get("symbol"):
        return f"{site['symbol']}+{site['offset']:#x}"
    return f"{site.get('module', '?')}+{site['offset']:#x}"


def print_sites(data: dict, console: Console, top: int) -> None:
    sites = data.get("sites", [])
    t = Table(title=f"Call sites ({data.get('variant', '?')}): {data.get('nsites', len(sites)):,} "
              f"sites, top {min(top, len(sites))} by bytes; {data.get('dropped', 0):,} calls "
              "not recorded", title_justify="left")
    for col, just in (("caller", "left"), ("module", "left"), ("calls", "right"),
                      ("bytes", "right"), ("sizes", "right"), ("most frequent", "right"),
                      ("custom bin", "left")):
        t.add_column(col, justify=just)
    for s in sites[:top]:
        sizes = f"{s['min']:,}" if s["min"] == s["max"] else f"{s['min']:,}..{s['max']:,}"
        t.add_row(caller(s), s.get("module", "?"), f"{s['calls']:,}", f"{s['bytes']:,}", sizes,
                  f"{s['mode']:,}", "yes" if s.get("custom") else "no")
    console.print(t)


def cmd_sites(args, command: list, console: Console) -> int:
    library = resolve_library(args.library, args.build_dir)
    data, status = run_sites(command, library)
    if args.json:
        try:
            Path(args.json).write_text(json.dumps(data, indent=1) + "\n")
        except OSError as e:
            raise LabError(f"cannot write {args.json}: {e.strerror or e}") from None
    print_sites(data, console, args.top)
    if data.get("processes", 1) > 1:
        console.print(f"note: {data['processes']} processes wrote statistics; shown: the one "
                      "that allocated the most bytes")
    if status:
        console.print(f"[yellow]note:[/yellow] {command[0]} exited with status {status}")
    return 0
