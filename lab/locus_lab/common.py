"""Things every module of the lab shares: the user-facing error, and where the repository is."""
from __future__ import annotations

import os
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


def human_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
