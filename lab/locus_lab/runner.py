"""Running one program once and measuring it.

Times and counters come from the kernel's accounting of the child (os.wait4): user and
system time, minor and major page faults. Wall time is measured around the child.

Memory comes from sampling /proc every few milliseconds while the program runs, over every
process of its tree: the peak RSS is the largest VmHWM (the kernel's per-process high-water
mark of resident memory, reset at exec) and the peak anonymous memory the largest RssAnon
(the heap's pages that are touched and not given back, without the file-backed pages of
program text and libraries that RSS also counts). ru_maxrss is kept in the raw data but
not used: Linux folds the RSS of the pre-exec copy of the parent (here, the lab's own
Python process) into it. The one exception: a program that ended before the first sample
could read its status (under load, a run of a few milliseconds) has no sampled peak, and
then ru_maxrss, an upper bound, stands in for it rather than a peak of 0.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .common import LabError

SAMPLE_PERIOD_S = 0.005
CACHEGRIND_SLOWDOWN = 60    # cachegrind runs a program about this many times slower


@dataclass
class RunResult:
    status: str                 # "ok", "exit N", "SIGSEGV", "timeout", "preload-failed"
    wall_s: float
    user_s: float
    sys_s: float
    maxrss_kib: int             # peak RSS (sampled VmHWM; 0 if the program ended at once)
    peak_anon_kib: int          # peak anonymous resident memory (sampled RssAnon)
    minflt: int
    majflt: int
    exit_code: int | None
    signal: str | None
    stderr_tail: str = ""
    ru_maxrss_kib: int = 0      # the kernel's figure, inflated by the parent (see above)
    samples: int = 0
    stdout: str = ""            # what the program printed, with capture_stdout only

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_json(self) -> dict:
        data = asdict(self)
        if not data["stdout"]:
            del data["stdout"]
        return data


def _status_fields(pid: int, names: tuple) -> dict:
    """Values in KiB of some fields of /proc/PID/status (missing ones are left out)."""
    out = {}
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                for name in names:
                    if line.startswith(name):
                        out[name] = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return out


def _process_tree(pid: int) -> list:
    """pid and its descendants (through /proc/PID/task/TID/children)."""
    tree, todo = [], [pid]
    while todo and len(tree) < 256:
        p = todo.pop()
        tree.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            continue
    return tree


def _kill_tree(pid: int) -> None:
    for p in reversed(_process_tree(pid)):
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


class _Sampler(threading.Thread):
    """Samples VmHWM and RssAnon of the process tree; kills the tree past the deadline."""

    def __init__(self, pid: int, deadline: float | None):
        super().__init__(daemon=True)
        self.pid = pid
        self.deadline = deadline
        self.peak_rss_kib = 0
        self.peak_anon_kib = 0
        self.samples = 0
        self.timed_out = False
        self.stop = threading.Event()

    def sample(self) -> None:
        for p in _process_tree(self.pid):
            fields = _status_fields(p, (b"VmHWM:", b"RssAnon:"))
            self.peak_rss_kib = max(self.peak_rss_kib, fields.get(b"VmHWM:", 0))
            self.peak_anon_kib = max(self.peak_anon_kib, fields.get(b"RssAnon:", 0))
        self.samples += 1

    def run(self):
        while not self.stop.is_set():
            self.sample()
            if self.deadline and time.monotonic() > self.deadline and not self.timed_out:
                self.timed_out = True
                _kill_tree(self.pid)
            self.stop.wait(SAMPLE_PERIOD_S)


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def _tail(path_or_file, limit: int = 2000) -> str:
    try:
        path_or_file.seek(0, os.SEEK_END)
        size = path_or_file.tell()
        path_or_file.seek(max(0, size - limit))
        return path_or_file.read().decode("utf-8", "replace").strip()
    except (OSError, ValueError):
        return ""


def run_once(argv: list, env: dict, cwd: str | None = None, timeout: float | None = None,
             passthrough: bool = False, capture_stdout: bool = False) -> RunResult:
    """Runs argv to completion and measures it. A crash or a non-zero exit is a result; a
    program that cannot be started at all is a LabError.

    Measured runs get no terminal: stdin and stdout are /dev/null (stdout goes to a file and
    comes back in the result with capture_stdout) and stderr is kept for the report. With
    passthrough the program keeps the lab's terminal. (The child stays in the lab's process
    group: Popen then starts it with vfork, so the first sample already sees the new
    program, and Ctrl-C reaches it too.)"""
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as out:
        streams = {} if passthrough else {
            "stdin": subprocess.DEVNULL, "stderr": err,
            "stdout": out if capture_stdout else subprocess.DEVNULL}
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(argv, env=env, cwd=cwd, **streams)
        except OSError as e:
            raise LabError(f"cannot start {argv[0]}: {e.strerror or e}") from None
        deadline = time.monotonic() + timeout if timeout else None
        sampler = _Sampler(proc.pid, None if passthrough else deadline)
        sampler.sample()  # at once: a very short program may end before the thread runs
        sampler.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            # Interrupted: take the program's whole tree down with us.
            sampler.stop.set()
            _kill_tree(proc.pid)
            try:
                os.wait4(proc.pid, 0)
            except OSError:
                pass
            proc.returncode = -signal.SIGKILL
            raise
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped: Popen must not wait
        sampler.stop.set()
        sampler.join()
        stderr_tail = _tail(err)
        stdout = _tail(out, 64 * 1024) if capture_stdout else ""

    exit_code, sig = None, None
    if os.WIFSIGNALED(status):
        sig = _signal_name(os.WTERMSIG(status))
        state = "timeout" if sampler.timed_out else sig
    else:
        exit_code = os.WEXITSTATUS(status)
        state = "ok" if exit_code == 0 else f"exit {exit_code}"
    if "cannot be preloaded" in stderr_tail:
        state = "preload-failed"
    peak_rss = sampler.peak_rss_kib or int(usage.ru_maxrss)
    return RunResult(state, wall, usage.ru_utime, usage.ru_stime, peak_rss,
                     sampler.peak_anon_kib, int(usage.ru_minflt), int(usage.ru_majflt),
                     exit_code, sig, stderr_tail if state != "ok" else "",
                     int(usage.ru_maxrss), sampler.samples, stdout)


# ---- cachegrind ------------------------------------------------------------------------------

CACHEGRIND_EVENTS = ("Ir", "I1mr", "ILmr", "Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw")
# One fixed cache geometry (size, associativity, line), so results compare across machines
# (cachegrind's own guess from the host can be odd on virtual machines): 32 KiB 8-way L1
# instruction and data caches and an 8 MiB 16-way last-level cache, 64-byte lines.
CACHEGRIND_CACHES = ("--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64")


def valgrind_available() -> bool:
    return shutil.which("valgrind") is not None


def parse_cachegrind(text: str) -> dict:
    """Event totals from one cachegrind.out file ("events:" and "summary:" lines)."""
    events, summary, desc = None, None, []
    for line in text.splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("summary:"):
            summary = [int(x) for x in line.split()[1:]]
        elif line.startswith("desc:"):
            desc.append(line[5:].strip())
    if not events or summary is None:
        raise ValueError("not a cachegrind output file")
    totals = dict(zip(events, summary))
    totals["_desc"] = desc
    return totals


def cache_metrics(totals: dict) -> dict:
    g = lambda k: int(totals.get(k, 0))  # noqa: E731
    return {
        "instructions": g("Ir"),
        "data_refs": g("Dr") + g("Dw"),
        "l1_misses": g("I1mr") + g("D1mr") + g("D1mw"),
        "l1d_misses": g("D1mr") + g("D1mw"),
        "ll_misses": g("ILmr") + g("DLmr") + g("DLmw"),
        "lld_misses": g("DLmr") + g("DLmw"),
    }


def run_cachegrind(argv: list, env: dict, cwd: str | None, timeout: float | None) -> dict:
    """One run under valgrind's cachegrind (simulated L1 and last-level caches), following
    child processes; the counts of all processes are added up."""
    with tempfile.TemporaryDirectory(prefix="locus-cg-") as tmp:
        cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=yes", *CACHEGRIND_CACHES,
               "--trace-children=yes", f"--cachegrind-out-file={tmp}/cg.%p", *argv]
        result = run_once(cmd, env, cwd, timeout)
        totals: dict = {}
        desc = []
        for f in Path(tmp).glob("cg.*"):
            try:
                t = parse_cachegrind(f.read_text(errors="replace"))
            except (OSError, ValueError):
                continue
            desc = t.pop("_desc") or desc
            for k, v in t.items():
                totals[k] = totals.get(k, 0) + v
    metrics = cache_metrics(totals) if totals else {}
    return {"status": result.status if totals or not result.ok else "no-output",
            "wall_s": result.wall_s, "cache_config": desc, **metrics,
            "stderr_tail": result.stderr_tail[-500:]}


# ---- perf stat (hardware counters) -----------------------------------------------------------

PERF_EVENTS = ("instructions", "cycles", "L1-dcache-load-misses", "LLC-load-misses",
               "dTLB-load-misses")


def perf_status() -> tuple[bool, str]:
    """Whether `perf stat` can read hardware counters here, and why not."""
    if not shutil.which("perf"):
        return False, "perf is not installed"
    try:
        r = subprocess.run(["perf", "stat", "-x,", "-e", "instructions,cycles", "--", "true"],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return False, f"perf failed: {e}"
    text = r.stderr
    if r.returncode != 0:
        return False, (text.strip().splitlines() or ["perf stat failed"])[-1]
    if "<not supported>" in text or "<not counted>" in text:
        return False, "no hardware counters on this machine (perf stat: not supported)"
    return True, "perf stat"


def parse_perf_csv(text: str) -> dict:
    values = {}
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) < 3 or line.startswith("#"):
            continue
        value, event = parts[0], parts[2]
        if re.fullmatch(r"\d+(\.\d+)?", value):
            values[event.split(":")[0]] = float(value)
    return values


def run_perf(argv: list, env: dict, cwd: str | None, timeout: float | None) -> dict:
    with tempfile.TemporaryDirectory(prefix="locus-perf-") as tmp:
        out = f"{tmp}/perf.csv"
        cmd = ["perf", "stat", "-x,", "-o", out, "-e", ",".join(PERF_EVENTS), "--", *argv]
        result = run_once(cmd, env, cwd, timeout)
        try:
            values = parse_perf_csv(Path(out).read_text())
        except OSError:
            values = {}
    return {"status": result.status, "wall_s": result.wall_s,
            **{k.replace("-", "_").lower(): v for k, v in values.items()}}
