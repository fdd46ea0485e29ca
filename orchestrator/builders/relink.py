"""Relink what links a shared library only when the library's interface changed.

CMake's Ninja rules relink every target that links a shared library whenever that library
is relinked: an edit of one function body in PyTorch's libtorch_cpu.so relinks
libtorch_python.so, libshm.so, functorch.so and the others (3.2 s of the 2.6 tree's edit
loop), and their outputs come out byte for byte as before, since a link reads only a shared
library's interface. So we configure with CMAKE_LINK_DEPENDS_NO_SHARED=ON (a target no
longer depends on the files of the shared libraries it links, only on their targets), and
after ninja we do what Chromium's `.TOC` files and Bazel's interface libraries do: a library
whose interface differs from the one recorded after the last build makes every target that
links it and is older than it dirty (its mtime set to 0, so ninja relinks it; durable even if
we are killed before the rerun), and ninja runs again, until nothing is stale.

The interface is what a linker reads of a shared library: soname, DT_NEEDED, search paths,
version definitions, and each exported symbol's name, versions, type, binding, visibility and
(data only) size (verify/elf_interface.py). Like ninja, we order a target and the libraries it
links by their mtimes. The records live in the
tree (RECORDS); a library without a record counts as changed, so a tree built before this
rule relinks what is older than the library, as CMake's own rule would.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.fs import FileSig, write_atomic
from orchestrator.verify.elf import read_elf
from orchestrator.verify.elf_interface import export_kinds, link_interface

RECORDS = ".orch-link-interfaces.json"  # in the build tree: {library: [[FileSig], interface]}
NO_SHARED = {"CMAKE_LINK_DEPENDS_NO_SHARED": "ON"}
_LINK_EDGE = re.compile(r"^build ((?:[^\s:$]|\$[ :$])+)(?: \|[^:]*)?: "
                        r"\w+?_(SHARED_LIBRARY|MODULE_LIBRARY|EXECUTABLE)_LINKER__")


def link_graph(build_dir: Path) -> tuple[set[str], dict[str, set[str]]]:
    """(the tree's shared libraries, each link output -> the tree's shared libraries it
    links), read from build.ninja: its link edges and their LINK_LIBRARIES."""
    shared: set[str] = set()
    links: dict[str, list[str]] = {}
    current: str | None = None
    with open(build_dir / "build.ninja", encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("build "):
                m = _LINK_EDGE.match(line)
                current = m.group(1).replace("$ ", " ").replace("$:", ":").replace("$$", "$") if m else None
                if m:
                    links[current] = []  # type: ignore[index]
                    if m.group(2) == "SHARED_LIBRARY":
                        shared.add(current)  # type: ignore[arg-type]
            elif current is not None and line.startswith("  LINK_LIBRARIES = "):
                links[current] = line.split("=", 1)[1].split()
            elif not line.startswith("  "):
                current = None
    prefix = str(build_dir) + "/"
    graph = {}
    for out, words in links.items():
        libs = {w[len(prefix):] if w.startswith(prefix) else w for w in words}
        graph[out] = {lib for lib in libs & shared if lib != out}
    return shared, graph


def interface(path: Path) -> str:
    """sha256 of what a linker reads of the shared library at `path`."""
    info = read_elf(path, full=True)
    try:
        names = link_interface(info)
    finally:
        info.close()
    return hashlib.sha256(names.encode() + b"\0" + export_kinds(path)).hexdigest()


def settle(build_dir: Path, rerun: Callable[[], None]) -> list[str]:
    """After ninja: relink (through `rerun`, ninja again) every link output older than a
    shared library of the tree it links whose interface changed; returns what was made
    stale, in order. Records the libraries' interfaces when nothing is stale any more."""
    shared, graph = link_graph(build_dir)
    if not any(graph.values()):
        return []
    records = _load(build_dir / RECORDS)
    stale_all: list[str] = []
    for _ in range(len(graph) + 1):
        changed: dict[str, int] = {}  # library -> its mtime_ns
        for lib in sorted(shared):
            try:
                st = os.stat(build_dir / lib)
            except OSError:
                continue
            sig = list(FileSig.of(st))
            rec = records.get(lib)
            if rec is not None and rec[0] == sig:
                continue
            now = interface(build_dir / lib)
            if rec is None or rec[1] != now:
                changed[lib] = st.st_mtime_ns
            records[lib] = [sig, now]
        stale = []
        for out, libs in sorted(graph.items()):
            try:
                mtime = os.stat(build_dir / out).st_mtime_ns
            except OSError:
                continue  # not built (a slice): it links what it finds when it is
            if mtime and any(lib in changed and mtime < changed[lib] for lib in libs):
                stale.append(out)
        if not stale:
            break
        for out in stale:
            os.utime(build_dir / out, ns=(0, 0))  # older than its objects: ninja relinks it
        stale_all += stale
        rerun()
    with contextlib.suppress(OSError):
        write_atomic(build_dir / RECORDS, json.dumps(records, sort_keys=True), durable=False)
    return stale_all


def _load(path: Path) -> dict[str, list[Any]]:
    try:
        data = json.loads(path.read_bytes())
        return {k: v for k, v in data.items()
                if isinstance(v, list) and len(v) == 2 and isinstance(v[1], str)}
    except (OSError, ValueError, AttributeError):
        return {}
