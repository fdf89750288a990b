"""`locus pressure`: a program under each allocator in a memory-limited cgroup (seed 000 §4.5,
Fig. 7): run time and major faults against the limit.

It needs cgroup v2 with the memory controller usable by this user: either a writable cgroup
of its own where `memory` is enabled for children (a delegated subtree), or systemd-run
--user (a transient scope with MemoryMax=). Without swap, a run over its limit is killed
rather than paged; with swap, its anonymous pages go there. Where none of this is offered
the command says so in one line and points to `locus paging`, the simulated curve.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from . import allocators as alloc_mod
from .common import LabError, find_paths, human_bytes
from .session import base_environment
from .paging import DEFAULT_ALLOCATORS

CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass
class PressureOptions:
    command: list
    allocators: str | None = None
    limits: str = "16M,32M,64M"
    timeout: float = 600.0
    build_dir: str | None = None


def swap_bytes(swaps: Path = Path("/proc/swaps")) -> int:
    """Total swap in bytes (0 when none or unreadable)."""
    try:
        lines = swaps.read_text().splitlines()[1:]
    except OSError:
        return 0
    return sum(int(line.split()[2]) * 1024 for line in lines if len(line.split()) > 2)


def own_cgroup(root: Path = CGROUP_ROOT, proc: Path = Path("/proc/self/cgroup")) -> Path | None:
    """This process's cgroup v2 folder (the `0::/path` line), or None."""
    try:
        for line in proc.read_text().splitlines():
            if line.startswith("0::"):
                return root / line[3:].lstrip("/")
    except OSError:
        pass
    return None


def cgroup_mounts(mounts: Path = Path("/proc/self/mounts")) -> tuple:
    """(the cgroup v2 mount point or None, whether a cgroup v1 hierarchy has the memory
    controller). Hybrid layouts mount v2 at /sys/fs/cgroup/unified, not at the root."""
    v2, v1_memory = None, False
    try:
        lines = mounts.read_text().splitlines()
    except OSError:
        return CGROUP_ROOT, False
    for line in lines:
        fields = line.split()
        if len(fields) < 4:
            continue
        if fields[2] == "cgroup2" and v2 is None:
            v2 = Path(fields[1].replace("\\040", " "))
        elif fields[2] == "cgroup" and "memory" in fields[3].split(","):
            v1_memory = True
    return v2, v1_memory


def method(root: Path | None = None, proc: Path = Path("/proc/self/cgroup"),
           mounts: Path = Path("/proc/self/mounts")) -> tuple:
    """How to limit memory here: ("cgroup", folder) for a writable delegated cgroup,
    ("systemd", None) for systemd-run --user, or (None, reason). `root` is the cgroup v2
    mount (found in `mounts` when not given)."""
    v1_memory = False
    if root is None:
        root, v1_memory = cgroup_mounts(mounts)
        if root is None:
            return None, "no cgroup v2 (cgroup v1 mounts only)"
    controllers = root / "cgroup.controllers"
    if not controllers.exists():
        return None, "no cgroup v2 (cgroup v1 mounts only)"
    if "memory" not in controllers.read_text().split():
        return None, (f"cgroup v2 at {root} without the memory controller"
                      + ("; it is on cgroup v1, a hybrid layout" if v1_memory else ""))
    mine = own_cgroup(root, proc)
    if mine is not None:
        try:
            enabled = (mine / "cgroup.subtree_control").read_text().split()
        except OSError:
            enabled = []
        if "memory" in enabled and os.access(mine, os.W_OK):
            return "cgroup", mine
    if shutil.which("systemd-run") and subprocess.run(
            ["systemd-run", "--user", "--scope", "-q", "true"], capture_output=True,
            timeout=30).returncode == 0:
        return "systemd", None
    return None, "cgroup v2 memory controller not delegated to this user"


def parse_limits(text: str) -> list:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    out = []
    for item in (s.strip().upper() for s in text.split(",") if s.strip()):
        try:
            out.append(int(item[:-1]) * units[item[-1]] if item[-1] in units else int(item))
        except (ValueError, KeyError):
            raise LabError(f"--limits: not a size: {item}") from None
    if not out:
        raise LabError("--limits: give at least one size")
    return out


def run_limited(how: tuple, limit: int, command: list, env: dict, timeout: float) -> dict:
    """One run of `command` limited to `limit` bytes: seconds, major faults, exit status."""
    kind, folder = how
    preexec = None
    if kind == "cgroup":
        group = folder / f"locus-pressure-{os.getpid()}"
        group.mkdir(exist_ok=True)
        (group / "memory.max").write_text(str(limit))

        def preexec():
            (group / "cgroup.procs").write_text(str(os.getpid()))
    else:
        command = ["systemd-run", "--user", "--scope", "-q", "-p", f"MemoryMax={limit}",
                   *command]
    started = time.monotonic()
    proc = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=preexec)
    deadline = started + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.01)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - started
    if kind == "cgroup":
        try:
            group.rmdir()
        except OSError:
            pass
    return {"limit": limit, "seconds": seconds, "major_faults": usage.ru_majflt,
            "status": proc.returncode}


def run_pressure(opts: PressureOptions, console: Console) -> int:
    if not opts.command:
        raise LabError("give the program after --, e.g. locus pressure -- build/bench/linked")
    how = method()
    if how[0] is None:
        swap = swap_bytes()
        console.print(f"locus pressure: not on this machine ({how[1]}; "
                      + (f"{human_bytes(swap)} swap" if swap else "no swap")
                      + "); see `locus paging -- ...` for the simulated LRU miss curve",
                      soft_wrap=True)
        return 0
    limits = parse_limits(opts.limits)
    paths = find_paths(opts.build_dir)
    chosen = alloc_mod.select(alloc_mod.discover(paths), opts.allocators or DEFAULT_ALLOCATORS)
    base_env, _ = base_environment()
    console.print(f"swap: {human_bytes(swap_bytes()) if swap_bytes() else 'none'} "
                  "(without swap a run over its limit is killed, not paged)")
    console.print("| allocator | limit | seconds | major faults | status |")
    console.print("|---|---|---|---|---|")
    for a in chosen:
        for limit in limits:
            r = run_limited(how, limit, opts.command, a.environment(base_env), opts.timeout)
            console.print(f"| {a.name} | {human_bytes(limit)} | {r['seconds']:.2f} | "
                          f"{r['major_faults']:,} | {r['status']} |")
    return 0
