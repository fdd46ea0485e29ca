"""lddtree-style resolution of DT_NEEDED, following glibc's ld.so search order, from files only.

For a library `L` needed by object `O` (loaded, through a chain, by the executable):
1. DT_RPATH of `O`, then of each object up the loading chain, unless `O` has DT_RUNPATH
   (RUNPATH drops RPATH); an RPATH of a chain member that itself has RUNPATH is skipped;
2. LD_LIBRARY_PATH (SearchConfig's; verify passes none: .orch/env.sh sets none);
3. DT_RUNPATH of `O` only (it does not propagate to `O`'s dependencies' lookups);
4. /etc/ld.so.conf and its `include` globs (what ld.so.cache is built from);
5. the default directories.
`$ORIGIN` is the directory of the object holding the entry; an empty entry is the current
directory. A candidate of another ELF class, byte order or machine is skipped, as ld.so does.
A soname already loaded in this closure satisfies later needs without a search.
"""
from __future__ import annotations

import functools
import glob
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.verify.elf import ElfInfo, header_platform, read_elf

DEFAULT_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
                "/lib", "/usr/lib")


realpath = functools.lru_cache(maxsize=None)(os.path.realpath)


def within(path: str, directory: str) -> bool:
    """True when `path` is `directory` or below it (plain string paths, already resolved)."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def parse_ld_so_conf(path: str = "/etc/ld.so.conf", _seen: set[str] | None = None) -> list[str]:
    """Directories named by an ld.so.conf, following `include` globs (relative to its dir)."""
    seen = _seen if _seen is not None else set()
    if path in seen:
        return []
    seen.add(path)
    dirs: list[str] = []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return []
    for raw in lines:
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include ") or line.startswith("include\t"):
            pattern = line[8:].strip()
            if not pattern.startswith("/"):
                pattern = os.path.join(os.path.dirname(path), pattern)
            for inc in sorted(glob.glob(pattern)):
                dirs += parse_ld_so_conf(inc, seen)
        elif line.startswith("hwcap "):
            continue
        else:
            dirs.append(os.path.normpath(line))
    return list(dict.fromkeys(dirs))


def expand(entries: list[str], origin: Path, cwd: str = "/") -> list[str]:
    """RPATH/RUNPATH entries with $ORIGIN (and ${ORIGIN}) replaced; '' means the cwd."""
    out = []
    for e in entries:
        if e == "":
            out.append(cwd)
            continue
        e = e.replace("${ORIGIN}", str(origin)).replace("$ORIGIN", str(origin))
        out.append(os.path.normpath(e))
    return out


@dataclass
class SearchConfig:
    """Where ld.so would look besides the objects' own paths."""
    ld_library_path: list[str] = field(default_factory=list)
    conf_dirs: list[str] = field(default_factory=parse_ld_so_conf)
    default_dirs: list[str] = field(default_factory=lambda: list(DEFAULT_DIRS))


@dataclass
class Edge:
    """One DT_NEEDED entry and what it resolved to (path None: not found)."""
    soname: str
    needed_by: Path
    path: Path | None
    tried: list[str]


@dataclass
class Closure:
    """A root object and everything it loads, in breadth-first load order."""
    root: ElfInfo
    objects: list[ElfInfo]
    edges: list[Edge]

    @property
    def missing(self) -> list[Edge]:
        return [e for e in self.edges if e.path is None]


class Resolver:
    """Resolves closures, reading each ELF file once (cached by real path)."""

    def __init__(self, search: SearchConfig) -> None:
        self.search = search
        self._elves: dict[Path, ElfInfo] = {}
        self._heads: dict[Path, ElfInfo] = {}
        self._platforms: dict[str, tuple[int, int, int] | None] = {}

    def elf(self, path: Path) -> ElfInfo:
        real = Path(realpath(str(path)))
        info = self._elves.get(real)
        if info is None:
            info = read_elf(real)
            info.path = real
            self._elves[real] = info
        return info

    def head(self, path: Path) -> ElfInfo:
        """The file's dynamic section only (what resolution needs), no symbols."""
        real = Path(realpath(str(path)))
        info = self._elves.get(real) or self._heads.get(real)
        if info is None:
            info = read_elf(real, symbols=False)
            info.path = real
            self._heads[real] = info
        return info

    def close(self) -> None:
        """Unmap every file a symbol lookup mapped."""
        for info in self._elves.values():
            info.close()

    def _platform(self, candidate: str) -> tuple[int, int, int] | None:
        if candidate not in self._platforms:
            self._platforms[candidate] = header_platform(Path(candidate)) if os.path.isfile(candidate) else None
        return self._platforms[candidate]

    def search_path(self, obj: ElfInfo, chain: list[ElfInfo]) -> list[str]:
        """The directories ld.so tries, in order, for a DT_NEEDED of `obj` loaded via `chain`."""
        dirs: list[str] = []
        if not obj.runpath:
            dirs += expand(obj.rpath, obj.path.parent)
            for loader in reversed(chain):
                if not loader.runpath:
                    dirs += expand(loader.rpath, loader.path.parent)
        dirs += self.search.ld_library_path
        dirs += expand(obj.runpath, obj.path.parent)
        dirs += self.search.conf_dirs
        dirs += self.search.default_dirs
        return list(dict.fromkeys(dirs))

    def find(self, soname: str, obj: ElfInfo, chain: list[ElfInfo]) -> tuple[Path | None, list[str]]:
        """The first compatible file for `soname` on obj's search path, and the path tried."""
        if "/" in soname:
            p = Path(soname) if soname.startswith("/") else obj.path.parent / soname
            return (p if p.is_file() else None), [str(p)]
        tried = self.search_path(obj, chain)
        for d in tried:
            cand = os.path.join(d, soname)
            plat = self._platform(cand)
            if plat is not None and plat == obj.platform:
                return Path(cand), tried
        return None, tried

    def closure(self, root: Path, preload: Sequence[Path] = (), heads: bool = False) -> Closure:
        """Load `root` like ld.so would, after `preload` (the host, e.g. the interpreter and
        torch's _C) has been loaded completely, as by an earlier dlopen. heads: read only
        the files' dynamic sections (`head`), enough to know what loads from where."""
        read = self.head if heads else self.elf
        objects: list[ElfInfo] = []
        loaded: dict[str, ElfInfo] = {}
        edges: list[Edge] = []
        for p in [*preload, root]:
            o = read(p)
            if o in objects:
                continue
            objects.append(o)
            loaded.setdefault(o.soname or o.path.name, o)
            self._load_deps(o, objects, loaded, edges, read)
        return Closure(read(root), objects, edges)

    def _load_deps(self, start: ElfInfo, objects: list[ElfInfo], loaded: dict[str, ElfInfo],
                   edges: list[Edge], read: Callable[[Path], ElfInfo]) -> None:
        queue: list[tuple[ElfInfo, list[ElfInfo]]] = [(start, [])]
        while queue:
            obj, chain = queue.pop(0)
            for soname in obj.needed:
                if soname in loaded:
                    edges.append(Edge(soname, obj.path, loaded[soname].path, []))
                    continue
                found, tried = self.find(soname, obj, chain)
                edges.append(Edge(soname, obj.path, found, tried))
                if found is None:
                    continue
                dep = read(found)
                loaded[soname] = dep
                if dep.soname:
                    loaded.setdefault(dep.soname, dep)
                if dep not in objects:
                    objects.append(dep)
                    queue.append((dep, [*chain, obj]))
