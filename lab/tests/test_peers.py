"""Allocators a user keeps in a folder (LOCUS_PEERS, ~/.local/lib) and the default choice:
found, named after their files, in the default comparison; `-a all` for the research builds."""
from pathlib import Path

import pytest

from locus_lab import allocators as alloc_mod
from locus_lab.common import find_paths

from conftest import BUILD_ARGS, LOCUS, needs_locus, run_locus


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """A LOCUS_PEERS folder and an empty ~/.local/lib."""
    mine = tmp_path / "mine"
    mine.mkdir()
    home_lib = tmp_path / "home" / ".local" / "lib"
    home_lib.mkdir(parents=True)
    monkeypatch.setenv(alloc_mod.PEERS_ENV, str(mine))
    monkeypatch.setattr(alloc_mod, "USER_LIB", home_lib)
    return mine, home_lib


def _fake_lib(path: Path) -> Path:
    path.write_bytes(b"\x7fELF")  # only found, never loaded here
    return path


def test_user_folders(folders):
    mine, home_lib = folders
    _fake_lib(mine / "libsnmallocshim.so")
    _fake_lib(mine / "libmimalloc.so.2.1")
    (mine / "libmimalloc.so").symlink_to("libmimalloc.so.2.1")   # the same file: once
    _fake_lib(mine / "notes.txt")
    _fake_lib(home_lib / "libhoard.so")
    _fake_lib(home_lib / "libpng16.so.16")                        # not an allocator's name
    found, notes = alloc_mod.find_user_peers({"mimalloc"})
    names = {a.name: Path(a.library).name for a in found}
    assert names == {"mimalloc-mine": "libmimalloc.so", "snmallocshim": "libsnmallocshim.so",
                     "hoard": "libhoard.so"}
    assert all(a.kind == "user" for a in found) and notes == []


def test_missing_peers_folder_is_a_note(folders, monkeypatch, tmp_path):
    monkeypatch.setenv(alloc_mod.PEERS_ENV, str(tmp_path / "nowhere"))
    found, notes = alloc_mod.find_user_peers(set())
    assert found == [] and notes == [f"LOCUS_PEERS: {tmp_path / 'nowhere'} is not a folder"]


@needs_locus
def test_default_choice_and_all(folders):
    mine, _ = folders
    (mine / "libmymalloc.so").symlink_to(LOCUS)
    disc = alloc_mod.discover(find_paths(BUILD_ARGS[1] if BUILD_ARGS else None))
    default = [a.name for a in alloc_mod.select(disc, None)]
    assert default[0] == "glibc" and "locus-vam" in default and "mymalloc" in default
    assert not any(a.kind == "locus" and a.name not in ("locus-vam", "locus-secure")
                   for a in alloc_mod.select(disc, None))
    assert len(alloc_mod.select(disc, "all")) == len(disc.allocators)
    assert [a.name for a in alloc_mod.select(disc, "glibc,mymalloc")] == ["glibc", "mymalloc"]


@needs_locus
def test_list_shows_user_allocators(folders):
    mine, _ = folders
    (mine / "libmymalloc.so").symlink_to(LOCUS)
    r = run_locus("list", *BUILD_ARGS, env={alloc_mod.PEERS_ENV: str(mine)})
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if "mymalloc" in ln)
    assert "user" in line and "yes" in line
    assert "LOCUS_PEERS=DIR" in r.stdout
