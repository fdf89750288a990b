"""Shared fixtures: the repository's paths, the tracer, compiling test programs, running
the `locus` command."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from locus_lab import trace
from locus_lab.common import find_paths

PROGS = Path(__file__).resolve().parent / "progs"

# The build folder the tests use (LOCUS_TEST_BUILD_DIR, else build/ in the repository).
BUILD_DIR = os.environ.get("LOCUS_TEST_BUILD_DIR")
BUILD = Path(BUILD_DIR) if BUILD_DIR else Path(__file__).resolve().parents[2] / "build"
BUILD_ARGS = ["--build-dir", BUILD_DIR] if BUILD_DIR else []
LOCUS = BUILD / "lib" / "liblocus.so"


# Marks a test that needs build/lib/liblocus.so.
needs_locus = pytest.mark.skipif(not LOCUS.exists(), reason="build/lib/liblocus.so not built")


def run_bench(name, *args, preload=None, timeout=120):
    """Runs build/bench/NAME ARGS, under LD_PRELOAD=preload if given (else no preload)."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = str(preload)
    return subprocess.run([str(BUILD / "bench" / name), *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=timeout)


def bench_program(name):
    """For the tests of one bench program: a mark that skips a test while build/bench/NAME is
    not built, and run(*args, preload=None) running it (run_bench)."""
    needs = pytest.mark.skipif(not (BUILD / "bench" / name).exists(),
                               reason=f"build/bench/{name} not built")

    def run(*args, preload=None):
        return run_bench(name, *args, preload=preload)
    return needs, run


@pytest.fixture(scope="session")
def paths():
    return find_paths()


@pytest.fixture(scope="session")
def cc():
    compiler = shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        pytest.skip("no C compiler")
    return compiler


@pytest.fixture(scope="session")
def tracer(paths, cc):
    return trace.tracer_library(paths)


@pytest.fixture(scope="session")
def build_prog(tmp_path_factory, cc):
    """Compiles lab/tests/progs/<name> (C, or C++ for .cc) once per session."""
    out_dir = tmp_path_factory.mktemp("progs")
    built = {}

    def build(name, *flags, source=None):
        key = (name, flags)
        if key not in built:
            src = source or PROGS / name
            exe = out_dir / (Path(name).stem + str(len(built)))
            compiler = cc
            if str(src).endswith(".cc"):
                compiler = shutil.which("c++") or shutil.which("g++")
                if not compiler:
                    pytest.skip("no C++ compiler")
            subprocess.run([compiler, *flags, "-o", str(exe), str(src), "-pthread"],
                           check=True)
            built[key] = exe
        return built[key]

    return build


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch):
    """Every test runs in its own folder, so default outputs (locus-results/, locus.trace)
    never land in the repository."""
    monkeypatch.chdir(tmp_path)


def run_locus(*args, cwd=None, env=None, timeout=600):
    """Runs `python -m locus_lab ARGS` and returns the CompletedProcess (text)."""
    full_env = dict(os.environ)
    full_env.pop("LD_PRELOAD", None)
    full_env["COLUMNS"] = "160"
    if env:
        full_env.update(env)
    return subprocess.run([sys.executable, "-m", "locus_lab", *map(str, args)], cwd=cwd,
                          env=full_env, capture_output=True, text=True, timeout=timeout)


# Every results folder has these (results.py, report.py); a suite adds its own files.
RESULTS_FILES = ("report.md", "summary.csv", "summary.json", "runs.jsonl", "runs.csv",
                 "meta.json")


def compare_suite(suite, tmp_path, *args, files=()):
    """`locus compare --suite SUITE --quick ARGS` into tmp_path/results: checks that it ended
    well, without a traceback, and wrote the results files and FILES (none empty), and that
    its summary.json names the suite. Returns the CompletedProcess, the folder and
    summary.json."""
    out = tmp_path / "results"
    r = run_locus("compare", "--suite", suite, "--quick", *args, "--output", out, *BUILD_ARGS)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    for name in RESULTS_FILES + tuple(files):
        assert (out / name).stat().st_size > 0, name
    data = json.loads((out / "summary.json").read_text())
    assert data["suite"] == suite
    return r, out, data
