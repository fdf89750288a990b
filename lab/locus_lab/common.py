"""Things every module of the lab shares: the user-facing error, and where the repository is."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# In the repository the lab's data (suite/, tracer/) sits beside this package in lab/. An
# installed lab (make install, the .deb) has a module written at install time that names its
# data folder and the folder that stands in for build/ (the libraries' registry, workloads).
try:
    from .installed import BUILD_DIR as INSTALLED_BUILD_DIR, LAB_DATA as INSTALLED_LAB_DATA
except ImportError:
    INSTALLED_BUILD_DIR = INSTALLED_LAB_DATA = None
LAB_DIR = Path(INSTALLED_LAB_DATA or Path(__file__).resolve().parent.parent)
SUITE_DIR = LAB_DIR / "suite"
TRACER_SOURCE = LAB_DIR / "tracer" / "locus_tracer.c"
REPLAY_SOURCE = LAB_DIR / "replay" / "locus_replay.c"


class LabError(Exception):
    """A problem the user can fix (bad option, missing program, unreadable file).

    The command line prints it as one line and exits with status 2, never with a traceback.
    """


@dataclass(frozen=True)
class Paths:
    root: Path       # the repository
    build: Path      # its build folder (build/ unless --build-dir)

    @property
    def lib(self) -> Path:
        return self.build / "lib"

    @property
    def bench(self) -> Path:
        return self.build / "bench"

    @property
    def tools(self) -> Path:
        return self.build / "tools"


def find_paths(build_dir: str | None = None) -> Paths:
    """The repository is the folder above lab/ (this package lives in lab/locus_lab/). The
    build folder is --build-dir, else an installed lab's registry folder, else build/."""
    root = LAB_DIR.parent
    build_dir = build_dir or INSTALLED_BUILD_DIR
    build = Path(build_dir).resolve() if build_dir else root / "build"
    if build_dir and not build.is_dir():
        raise LabError(f"build folder not found: {build_dir}")
    return Paths(root=root, build=build)


def cache_dir() -> Path:
    """Where the lab keeps things it builds for itself (the tracer, when build/ lacks it)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    path = Path(base) / "locus-lab"
    path.mkdir(parents=True, exist_ok=True)
    return path


def built_or_compiled(built: Path, source: Path, what: str, flags: list,
                      libs: list = ()) -> Path:
    """The lab's C helpers (the tracer, the replay driver): `built` (by `make`) when it is at
    least as new as `source` and the headers beside it; otherwise `source` compiled with cc
    into the cache folder, keyed by the hash of the source and those headers, so an edited
    source is never run stale."""
    files = [source, *sorted(source.parent.glob("*.h"))]
    if built.exists() and built.stat().st_mtime >= max(f.stat().st_mtime for f in files):
        return built
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:16]
    target = cache_dir() / f"{built.stem}-{digest}{built.suffix}"
    if target.exists():
        return target
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise LabError(f"no C compiler (cc) to build the {what}; run `make` instead")
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    cmd = [cc, *flags, "-o", str(tmp), str(source), *libs]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise LabError(f"cannot build the {what}: "
                       + (r.stderr.strip().splitlines() or ["?"])[0])
    tmp.replace(target)
    return target


def human_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
