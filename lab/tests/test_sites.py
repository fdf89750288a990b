"""`locus sites`: a small bench program under liblocus.so, the JSON it keeps, and its errors."""
import json
import os
from pathlib import Path

import pytest

from conftest import run_locus

BUILD_DIR = os.environ.get("LOCUS_TEST_BUILD_DIR")
BUILD = Path(BUILD_DIR) if BUILD_DIR else Path(__file__).resolve().parents[2] / "build"


def need_built():
    if not (BUILD / "bench" / "churn").is_file() or not (BUILD / "lib" / "liblocus.so").is_file():
        pytest.skip("build/bench/churn or build/lib/liblocus.so is not built yet")


def test_sites_of_churn(tmp_path):
    need_built()
    out = tmp_path / "sites.json"
    r = run_locus("sites", "--top", "3", "--json", out, "--build-dir", BUILD, "--",
                  BUILD / "bench" / "churn", "--quick")
    assert r.returncode == 0, r.stderr
    assert "Call sites (vam)" in r.stdout
    assert "800,000" in r.stdout                  # churn's loop: one site, 800,000 calls
    data = json.loads(out.read_text())
    assert data["variant"] == "vam" and data["enabled"] is True
    calls = sorted((s["calls"] for s in data["sites"]), reverse=True)
    assert calls[:2] == [800_000, 100_000]
    top = data["sites"][0]
    assert top["module"] == "churn" and top["min"] >= 1 and top["max"] <= 256
    assert all(s["custom"] is False for s in data["sites"])


def test_sites_other_library(tmp_path):
    need_built()
    if not (BUILD / "lib" / "liblocus-lf.so").is_file():
        pytest.skip("liblocus-lf.so is not built")
    r = run_locus("sites", "--library", "lf", "--build-dir", BUILD, "--",
                  BUILD / "bench" / "churn", "--quick")
    assert r.returncode == 0, r.stderr
    assert "Call sites (lf)" in r.stdout and "yes" in r.stdout


@pytest.mark.parametrize("args, message", [
    (["sites", "--", "/nonexistent/program"], "cannot run /nonexistent/program"),
    (["sites", "--library", "no-such-library", "--", "true"], "library not found"),
    (["sites", "--top", "0", "--", "true"], "must be at least 1"),
    (["sites"], "give the program after --"),
])
def test_sites_errors(args, message):
    r = run_locus(*args)
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_sites_not_locus(tmp_path):
    r = run_locus("sites", "--library", "/lib/x86_64-linux-gnu/libm.so.6", "--", "true")
    if "library not found" in r.stderr:
        pytest.skip("no libm at the usual path")
    assert r.returncode == 2
    assert "wrote no site statistics" in r.stderr and "Traceback" not in r.stderr


def test_sites_through_a_shell(tmp_path):
    """A command that starts others: each process writes its own file (a shell that leaves by
    _exit writes none); the busiest is shown."""
    need_built()
    r = run_locus("sites", "--build-dir", BUILD, "--", "sh", "-c",
                  f"{BUILD / 'bench' / 'churn'} --quick; true")
    assert r.returncode == 0, r.stderr
    assert "800,000" in r.stdout and "churn" in r.stdout
