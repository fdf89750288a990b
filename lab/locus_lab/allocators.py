"""Finding the allocators to compare: the Locus libraries in build/lib, glibc, and the peers.

An allocator is used by preloading its shared library (LD_PRELOAD); glibc is the absence of
a preload. Locus libraries come from build/variants.json when it exists (entries marked
"debug" are skipped: they are consistency-checking builds, not designs to compare), else
from the files build/lib/liblocus*.so (minus *debug*). Peers are the distribution's packages,
and the libraries a user keeps in LOCUS_PEERS folders or ~/.local/lib (find_user_peers).
"""
from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sysconfig
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .common import LabError, Paths

BASELINE = "glibc"


@dataclass(frozen=True)
class Peer:
    name: str
    soname: str
    package: str
    globs: tuple = ()         # where else to look (a library outside the loader's folders)
    optional: bool = False    # not reported missing, not installed by `make bench`


PEERS = (
    Peer("jemalloc", "libjemalloc.so.2", "libjemalloc2"),
    Peer("tcmalloc", "libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
    Peer("mimalloc", "libmimalloc.so.2", "libmimalloc2.0"),
    # LLVM's hardened allocator, shipped in Debian with the compiler runtime.
    Peer("scudo", "libclang_rt.scudo_standalone-x86_64.so", "libclang-rt-14-dev",
         globs=("/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.scudo_standalone-x86_64.so",),
         optional=True),
)
CORE_PEERS = tuple(p for p in PEERS if not p.optional)
INSTALL_HINT = "apt-get install " + " ".join(p.package for p in CORE_PEERS)
# Folders of allocators built by hand: LOCUS_PEERS (every shared library in it, a list
# separated by ':'), then ~/.local/lib (there, only files named like an allocator).
PEERS_ENV = "LOCUS_PEERS"
USER_LIB = Path("~/.local/lib")
ALLOCATOR_NAME = re.compile(r"malloc|scudo|hoard|rpmalloc|snmalloc", re.I)
# The default choice (no --allocators): what someone choosing an allocator compares.
DEFAULT_LOCUS = ("liblocus.so", "liblocus-secure.so")


@dataclass(frozen=True)
class Allocator:
    name: str                 # as shown in tables: "glibc", "locus-vam", "jemalloc"
    kind: str                 # "system", "locus", "peer" or "custom"
    library: str | None       # the shared library to preload; None for glibc
    design: str = ""          # Locus design ("vam", "phk", ...)
    aliases: tuple = ()       # other names accepted by --allocators
    version: str = ""

    def environment(self, base: dict) -> dict:
        env = dict(base)
        if self.library:
            previous = env.get("LD_PRELOAD", "")
            env["LD_PRELOAD"] = self.library + (" " + previous if previous else "")
        return env

    def to_json(self) -> dict:
        data = asdict(self)
        data["aliases"] = list(self.aliases)
        return data


@dataclass
class Discovery:
    allocators: list = field(default_factory=list)      # usable, in display order
    missing_peers: list = field(default_factory=list)   # Peer entries not installed
    notes: list = field(default_factory=list)           # warnings worth printing


def _glibc_version() -> str:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):
        return ""


def _library_dirs() -> list:
    dirs = []
    multiarch = sysconfig.get_config_var("MULTIARCH")
    for base in ("/usr/lib", "/lib", "/usr/local/lib"):
        if multiarch:
            dirs.append(Path(base) / multiarch)
        dirs.append(Path(base))
    dirs += [Path("/usr/lib64"), Path("/lib64")]
    return dirs


def find_library(soname: str) -> str | None:
    """The path of an installed shared library, by its soname."""
    for d in _library_dirs():
        candidate = d / soname
        if candidate.exists():
            return str(candidate)
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        line = line.strip()
        if line.startswith(soname + " ") and "=>" in line:
            return line.split("=>", 1)[1].strip()
    return None


def _package_version(package: str) -> str:
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _locus_name(variant: str) -> str:
    return variant if variant.startswith("locus") else f"locus-{variant}"


def _resolve_file(paths: Paths, file: str) -> Path:
    p = Path(file)
    if p.is_absolute():
        return p
    for base in (paths.root, paths.build.parent):
        if (base / p).exists():
            return base / p
    return paths.lib / p.name


def find_locus(paths: Paths) -> tuple[list, list]:
    """Locus libraries (variants.json when present, else a glob) and notes."""
    notes = []
    found = []
    registry = paths.build / "variants.json"
    if registry.exists():
        try:
            entries = json.loads(registry.read_text())
        except (OSError, ValueError) as e:
            raise LabError(f"cannot read {registry}: {e}") from None
        for entry in entries:
            if entry.get("debug"):
                continue
            lib = _resolve_file(paths, entry.get("file", ""))
            name = _locus_name(entry.get("name", lib.stem))
            if not lib.exists():
                notes.append(f"{name}: {lib} is listed in variants.json but not built")
                continue
            aliases = [entry.get("name", "")]
            if lib.name == "liblocus.so":
                aliases.append("locus")
            found.append(Allocator(name, "locus", str(lib), entry.get("design", ""),
                                   tuple(a for a in aliases if a and a != name)))
    elif paths.lib.is_dir():
        for lib in sorted(paths.lib.glob("liblocus*.so")):
            if "debug" in lib.name:
                continue
            m = re.fullmatch(r"liblocus(?:-(.+))?\.so", lib.name)
            if not m:
                continue
            variant = m.group(1) or "vam"  # liblocus.so is the flagship design, Vam
            aliases = ("locus", variant) if m.group(1) is None else (variant,)
            found.append(Allocator(_locus_name(variant), "locus", str(lib),
                                   variant.split("-")[0], aliases))
    # The flagship first, then the others by name.
    found.sort(key=lambda a: (Path(a.library).name != "liblocus.so", a.name))
    return found, notes


def find_peer(peer: Peer) -> str | None:
    """An installed peer's library: by soname in the loader's folders, else its globs."""
    lib = None if peer.globs else find_library(peer.soname)
    for pattern in peer.globs:
        hits = sorted(glob.glob(pattern))
        if hits:
            lib = hits[-1]      # the newest version folder
    return lib


def _user_name(lib: Path) -> str:
    """libmimalloc.so.2.1 -> mimalloc; libclang_rt.scudo_standalone-x86_64.so -> scudo."""
    stem = lib.name.split(".so")[0]
    stem = stem[3:] if stem.startswith("lib") else stem
    m = ALLOCATOR_NAME.search(stem)
    return "scudo" if m and m.group(0).lower() == "scudo" else stem


def user_folders() -> list:
    """(folder, only files named like an allocator?) where users keep allocators of their
    own: each folder of LOCUS_PEERS, then ~/.local/lib."""
    out = [(Path(d).expanduser(), False)
           for d in os.environ.get(PEERS_ENV, "").split(":") if d]
    out.append((USER_LIB.expanduser(), True))
    return out


def find_user_peers(taken: set) -> tuple[list, list]:
    """Allocators in the user's folders (user_folders): one per library file (symlinks to the
    same file counted once), named after the file; a name already taken (a distribution
    peer of the same name) gets the folder's name as a suffix (mimalloc-mine). Returns the
    allocators and notes."""
    found, notes, seen = [], [], set()
    for folder, named_only in user_folders():
        if not folder.is_dir():
            if not named_only:
                notes.append(f"{PEERS_ENV}: {folder} is not a folder")
            continue
        for lib in sorted(folder.glob("*.so*"), key=lambda p: (len(p.name), p.name)):
            if not lib.is_file() or (named_only and not ALLOCATOR_NAME.search(lib.name)):
                continue
            real = lib.resolve()
            if real in seen or not re.search(r"\.so(\.\d+)*$", lib.name):
                continue
            seen.add(real)
            name = _user_name(lib)
            if name in taken:
                name = f"{name}-{folder.name.lstrip('.') or 'user'}"
            if name in taken:
                continue
            taken.add(name)
            found.append(Allocator(name, "user", str(lib)))
    return found, notes


def discover(paths: Paths) -> Discovery:
    d = Discovery()
    d.allocators.append(Allocator(BASELINE, "system", None, version=_glibc_version()))
    locus, notes = find_locus(paths)
    d.notes += notes
    if not locus:
        d.notes.append(f"no Locus library in {paths.lib} (build it with `make`)")
    d.allocators += locus
    for peer in PEERS:
        lib = find_peer(peer)
        if lib:
            d.allocators.append(Allocator(peer.name, "peer", lib,
                                          version=_package_version(peer.package)))
        elif not peer.optional:
            d.missing_peers.append(peer)
    users, notes = find_user_peers({a.name for a in d.allocators}
                                   | {a for x in d.allocators for a in x.aliases})
    d.allocators += users
    d.notes += notes
    return d


def default_choice(discovery: Discovery) -> list:
    """The allocators compared without --allocators: glibc, the flagship and its hardened
    build, and every peer found (the distribution's and the user's own). The research builds
    are one `--allocators all` away."""
    return [a for a in discovery.allocators
            if a.kind != "locus" or Path(a.library).name in DEFAULT_LOCUS]


def missing_message(missing: list) -> str:
    names = ", ".join(p.name for p in missing)
    return f"not installed: {names} (install with: {INSTALL_HINT})"


def select(discovery: Discovery, spec: str | None) -> list:
    """The allocators named in `spec` ("glibc,locus,jemalloc" or "name=/path/lib.so"), every
    one found ("all"), or without a spec the default choice (default_choice). Unknown names are an error that lists what exists."""
    if not spec:
        return default_choice(discovery)
    if spec.strip() == "all":
        return list(discovery.allocators)
    by_name = {}
    for a in discovery.allocators:
        by_name[a.name] = a
        for alias in a.aliases:
            by_name.setdefault(alias, a)
    missing = {p.name: p for p in PEERS if p.name not in by_name}
    chosen = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if "=" in item:
            name, lib = item.split("=", 1)
            if not Path(lib).is_file():
                raise LabError(f"allocator {name}: no such library: {lib}")
            a = Allocator(name, "custom", str(Path(lib).resolve()))
        elif item in by_name:
            a = by_name[item]
        elif item in missing:
            p = missing[item]
            raise LabError(f"allocator {item} is not installed (install with: apt-get install {p.package})")
        else:
            known = ", ".join(a.name for a in discovery.allocators)
            hint = "" if any(a.kind == "locus" for a in discovery.allocators) else \
                " (no Locus library built yet: run `make`)"
            raise LabError(f"unknown allocator '{item}'; available: {known}{hint}")
        if a.name not in (c.name for c in chosen):
            chosen.append(a)
    if not chosen:
        raise LabError("no allocator selected")
    return chosen


def check_preload(allocator: Allocator) -> str | None:
    """Runs /bin/true under the allocator; returns the loader's complaint, if any."""
    if not allocator.library:
        return None
    try:
        r = subprocess.run(["true"], env=allocator.environment({"PATH": "/usr/bin:/bin"}),
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return str(e)
    err = r.stderr.strip()
    if r.returncode != 0 or "cannot be preloaded" in err or "error while loading" in err:
        return err.splitlines()[0] if err else f"exit status {r.returncode}"
    return None
