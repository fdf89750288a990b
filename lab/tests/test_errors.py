"""Bad input: one line on stderr, status 2, never a traceback."""
import pytest

from conftest import run_locus


def assert_one_line_error(r, *fragments):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    for f in fragments:
        assert f in lines[0], lines[0]


def test_unknown_allocator():
    assert_one_line_error(run_locus("compare", "-a", "glibc,nosuch", "--", "true"),
                          "unknown allocator 'nosuch'", "available: glibc")


def test_missing_command():
    assert_one_line_error(run_locus("compare", "-a", "glibc", "--", "no-such-program-x"),
                          "command not found: no-such-program-x")


def test_not_executable(tmp_path):
    f = tmp_path / "data.txt"
    f.write_text("hello")
    assert_one_line_error(run_locus("compare", "-a", "glibc", "--", f), "not an executable")


def test_program_that_cannot_start(tmp_path):
    f = tmp_path / "garbage"
    f.write_bytes(b"\x7fELF garbage, not a program")
    f.chmod(0o755)
    assert_one_line_error(run_locus("compare", "-a", "glibc", "--no-frag", "--", f),
                          "cannot start")


def test_library_that_cannot_be_preloaded(tmp_path):
    lib = tmp_path / "libbroken.so"
    lib.write_text("not a library")
    assert_one_line_error(run_locus("compare", "-a", f"glibc,broken={lib}", "--", "true"),
                          "broken cannot be preloaded")


def test_custom_library_missing(tmp_path):
    assert_one_line_error(run_locus("compare", "-a", f"mine={tmp_path}/nope.so", "--", "true"),
                          "no such library")


def test_unknown_workload():
    assert_one_line_error(run_locus("compare", "-a", "glibc", "-w", "nosuch"),
                          "unknown or unavailable workload 'nosuch'")


@pytest.mark.parametrize("args, fragment", [
    (["compare", "--repetitions", "0"], "must be at least 1"),
    (["compare", "--bogus"], "unrecognized arguments"),
    (["compare", "--timeout", "soon"], "not a number"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_options(args, fragment):
    assert_one_line_error(run_locus(*args), fragment)


def test_report_of_a_missing_folder(tmp_path):
    assert_one_line_error(run_locus("report", tmp_path / "nope"), "no such results folder")


def test_report_of_a_folder_that_is_not_results(tmp_path):
    assert_one_line_error(run_locus("report", tmp_path), "not a `locus compare` results folder")


def test_trace_without_command():
    assert_one_line_error(run_locus("trace"), "give the program to trace after --")


def test_trace_of_a_missing_program(tmp_path):
    assert_one_line_error(run_locus("trace", "-o", tmp_path / "t", "--", "no-such-program-x"),
                          "command not found")


def test_stats_of_a_file_that_is_not_a_trace(tmp_path):
    f = tmp_path / "x"
    f.write_text("hello")
    assert_one_line_error(run_locus("trace", "stats", f), "not a Locus trace")
    assert_one_line_error(run_locus("trace", "stats", tmp_path / "missing"), "cannot read")


def test_cache_and_workloads_with_a_command():
    assert_one_line_error(run_locus("compare", "-a", "glibc", "-w", "churn", "--", "true"),
                          "--workloads")
