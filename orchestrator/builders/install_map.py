"""Which build-tree or source file each installed file is a copy of, read from the
`cmake_install.cmake` scripts CMake generated (the top-level one and those it includes).

`cmake --install` copies (RPATH rewritten, maybe stripped) what these scripts name; given the
same scripts and an unchanged source file, it stages the same bytes again. `Store.reuse_unchanged`
uses the map to give such a file its committed inode instead of hashing the new copy.
Only `file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/…" … FILES …)` calls with literal
paths are read; anything else (install(CODE), other destinations) maps nothing and is hashed.
The map is kept in the tree (MAP_CACHE) under the stat of every script read for it: parsing
PyTorch's ~20 scripts again cost 0.1-0.17 s of every incremental build.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from orchestrator.fs import write_atomic
from orchestrator.memo.file_reads import stat_sig

SCRIPT = "cmake_install.cmake"
MAP_CACHE = ".orch-install-map.json"  # in the build tree: the last map and what it was read from
PREFIX_VAR = "${CMAKE_INSTALL_PREFIX}"
_TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)"|([^\s()"]+)|(\))')
_INCLUDE = re.compile(r'include\("([^"$]+/cmake_install\.cmake)"\)')
FILE_TYPES = {"FILE", "PROGRAM", "EXECUTABLE", "SHARED_LIBRARY", "MODULE", "STATIC_LIBRARY"}
# Keywords after FILES that end the file list (their values are not files).
_AFTER_FILES = {"RENAME", "PERMISSIONS", "FILE_PERMISSIONS", "DIRECTORY_PERMISSIONS",
                "USE_SOURCE_PERMISSIONS", "FILES_MATCHING", "PATTERN", "REGEX", "EXCLUDE",
                "OPTIONAL", "MESSAGE_NEVER", "MESSAGE_LAZY", "MESSAGE_ALWAYS", "COMPONENTS",
                "CONFIGURATIONS", "FOLLOW_SYMLINK_CHAIN", "TYPE", "DESTINATION"}


class InstallMap:
    """Installed path (under the prefix) -> the file `cmake --install` copies there."""

    def __init__(self) -> None:
        # Strings, made Paths on lookup: PyTorch's map has ~8k files, and making them all
        # Paths cost 0.05 s of every incremental build.
        self.files: dict[str, str] = {}
        self.dirs: list[tuple[str, str]] = []  # (destination dir, source dir), in order

    def source_of(self, rel: str) -> Path | None:
        """The file copied to `rel`; None when no rule or more than one existing file could
        be (which one the install took would then depend on the order of its rules)."""
        candidates = {Path(self.files[rel])} if rel in self.files else set()
        for into, top in self.dirs:
            if not into or rel.startswith(into + "/"):
                candidates.add(Path(top) / (rel[len(into) + 1:] if into else rel))
        if len(candidates) > 1:
            candidates = {c for c in candidates if c.exists()}
        return candidates.pop() if len(candidates) == 1 else None

    def add(self, dest: str, kind: str, files: list[str], rename: str | None) -> None:
        if not dest.startswith(PREFIX_VAR) or "$" in dest[len(PREFIX_VAR):]:
            return
        base = dest[len(PREFIX_VAR):].strip("/")
        for f in files:
            if "$" in f or "\\" in f or not f.startswith("/"):
                continue
            if kind in FILE_TYPES:
                name = rename if rename and len(files) == 1 else os.path.basename(f)
                self.files[_join(base, name)] = f
            elif kind == "DIRECTORY":
                top = f.rstrip("/")
                self.dirs.append((base if f.endswith("/") else _join(base, os.path.basename(top)),
                                  top))


def install_sources(build_dir: Path) -> tuple[str, InstallMap]:
    """(digest of every install script read, the map); ("", empty map) when the tree has
    no top-level install script. From MAP_CACHE when every script it was read from (and
    every include that was missing) is as it was then."""
    cache = build_dir / MAP_CACHE
    kept = _kept(cache)
    if kept is not None:
        return kept
    digest = hashlib.sha256()
    found = InstallMap()
    pending, seen = [build_dir / SCRIPT], set()
    read: list[list[Any]] = []  # [script, its stat_sig before it was read (None: missing)]
    while pending:
        script = pending.pop(0)
        if script in seen:
            continue
        seen.add(script)
        read.append([str(script), stat_sig(str(script))])
        try:
            text = script.read_text(errors="replace")
        except OSError:
            if script == build_dir / SCRIPT:
                return "", InstallMap()
            continue
        digest.update(f"{script}\0{len(text)}\0{text}".encode())
        pending += [Path(p) for p in _INCLUDE.findall(text)]
        for dest, kind, files, rename in _install_calls(text):
            found.add(dest, kind, files, rename)
    with contextlib.suppress(OSError):
        write_atomic(cache, json.dumps({
            "scripts": read, "digest": digest.hexdigest(),
            "files": found.files, "dirs": found.dirs}), durable=False)
    return digest.hexdigest(), found


def _kept(cache: Path) -> tuple[str, InstallMap] | None:
    """MAP_CACHE's map when every script it names has the stat it was read with."""
    try:
        data = json.loads(cache.read_bytes())
        if not data["scripts"] or any(stat_sig(p) != sig for p, sig in data["scripts"]):
            return None
        found = InstallMap()
        files, dirs = data["files"], data["dirs"]
        if not (isinstance(files, dict) and all(isinstance(f, str) for f in files.values())
                and all(isinstance(into, str) and isinstance(top, str) for into, top in dirs)):
            return None
        found.files = files
        found.dirs = [(into, top) for into, top in dirs]
        return str(data["digest"]), found
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _install_calls(text: str) -> list[tuple[str, str, list[str], str | None]]:
    """(destination, TYPE, FILES, RENAME) of each `file(INSTALL …)` call."""
    calls = []
    for m in re.finditer(r"\bfile\(INSTALL\b", text):
        args: list[str] = []
        for t in _TOKEN.finditer(text, m.end()):
            if t.group(3):
                break
            args.append(t.group(1) if t.group(1) is not None else t.group(2))
        kv: dict[str, str] = {}
        files: list[str] = []
        i = 0
        while i < len(args):
            word = args[i]
            if word in ("DESTINATION", "TYPE", "RENAME") and i + 1 < len(args):
                kv[word] = args[i + 1]
                i += 2
            elif word == "FILES":
                i += 1
                while i < len(args) and args[i] not in _AFTER_FILES:
                    files.append(args[i])
                    i += 1
            else:
                i += 1
        if "DESTINATION" in kv and "TYPE" in kv:
            calls.append((kv["DESTINATION"], kv["TYPE"], files, kv.get("RENAME")))
    return calls


def _join(base: str, name: str) -> str:
    return f"{base}/{name}" if base else name
