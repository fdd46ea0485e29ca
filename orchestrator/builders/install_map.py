"""Which build-tree or source file each installed file is a copy of, read from the
`cmake_install.cmake` scripts CMake generated (the top-level one and those it includes).

`cmake --install` copies (RPATH rewritten, maybe stripped) what these scripts name; given the
same scripts and an unchanged source file, it stages the same bytes again. `Store.reuse_unchanged`
uses the map to give such a file its committed inode instead of hashing the new copy.
Only `file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/…" … FILES …)` calls with literal
paths are read; anything else (install(CODE), other destinations) maps nothing and is hashed.
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

SCRIPT = "cmake_install.cmake"
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
        self.files: dict[str, Path] = {}
        self.dirs: list[tuple[str, Path]] = []  # (destination dir, source dir), in order

    def source_of(self, rel: str) -> Path | None:
        """The file copied to `rel`; None when no rule or more than one existing file could
        be (which one the install took would then depend on the order of its rules)."""
        candidates = {self.files[rel]} if rel in self.files else set()
        for into, top in self.dirs:
            if not into or rel.startswith(into + "/"):
                candidates.add(top / (rel[len(into) + 1:] if into else rel))
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
                self.files[_join(base, name)] = Path(f)
            elif kind == "DIRECTORY":
                top = f.rstrip("/")
                self.dirs.append((base if f.endswith("/") else _join(base, os.path.basename(top)),
                                  Path(top)))


def install_sources(build_dir: Path) -> tuple[str, InstallMap]:
    """(digest of every install script read, the map); ("", empty map) when the tree has
    no top-level install script."""
    digest = hashlib.sha256()
    found = InstallMap()
    pending, seen = [build_dir / SCRIPT], set()
    while pending:
        script = pending.pop(0)
        if script in seen:
            continue
        seen.add(script)
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
    return digest.hexdigest(), found


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
