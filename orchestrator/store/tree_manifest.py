"""A manifest of the files a directory held when it was written, to catch later changes.

Each entry records size, mtime, inode and sha256 (symlinks: their target). A quick check
compares lstat() only (cheap enough for every use); a full check re-hashes every file and
also lists files nobody wrote. Used for materialized toolchains (toolchain/materialize.py).
"""
from __future__ import annotations

import json
import marshal
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.fs import FileSig, write_atomic
from orchestrator.hashing import known_sha256

# Python's bytecode caches: rewritten by any interpreter run, checked by Python itself.
IGNORED_DIRS = ("__pycache__",)


def _walk(root: Path, exclude: Iterable[str]) -> Iterable[tuple[str, os.stat_result]]:
    """(relative path, lstat) of every file and symlink below root, directories not
    followed; with os.scandir and strings (pathlib cost 1.3 s of a toolchain pull's 20k)."""
    skip = set(exclude)
    base = str(root)
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        with os.scandir(f"{base}/{rel_dir}" if rel_dir else base) as it:
            found = sorted(it, key=lambda e: e.name)
        subdirs = []
        for e in found:
            rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
            if e.is_dir(follow_symlinks=False):
                if e.name not in IGNORED_DIRS:
                    subdirs.append(rel)
            elif rel not in skip:
                yield rel, e.stat(follow_symlinks=False)
        stack.extend(reversed(subdirs))


def scan(root: Path, exclude: Iterable[str] = ()) -> dict[str, dict[str, Any]]:
    """path -> {size, mtime_ns, ino, sha256} for files, {target} for symlinks. A file whose
    inode, as it is now, this process checked already (`hashing.remember_sha256`: a pull
    checked it on the way in) is not read again."""
    out: dict[str, dict[str, Any]] = {}
    base = f"{root}/"
    for rel, st in _walk(root, exclude):
        if stat.S_ISLNK(st.st_mode):
            out[rel] = {"target": os.readlink(base + rel)}
        elif stat.S_ISREG(st.st_mode):  # fs.FileSig less the ctime: a new hard link to the
            # file (the store's pool, a teammate's pull) moves it and changes nothing
            out[rel] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino,
                        "sha256": known_sha256(base + rel, st), "exec": bool(st.st_mode & 0o111)}
    return out


def write(root: Path, name: str, exclude: Iterable[str] = ()) -> Path:
    """Scan root and write the manifest as root/name (itself excluded)."""
    entries = scan(root, [name, *exclude])
    path = root / name
    path.write_text(dumps(entries))
    return path


def dumps(entries: dict[str, dict[str, Any]]) -> str:
    """The manifest file's text: compact (21k entries pretty-printed cost 1 s a pull)."""
    return json.dumps({"schema": 1, "files": entries}, sort_keys=True, separators=(",", ":"))


def read(root: Path, name: str) -> dict[str, dict[str, Any]] | None:
    path = root / name
    if not path.is_file():
        return None
    files: dict[str, dict[str, Any]] = json.loads(path.read_text())["files"]
    return files


@dataclass
class Changes:
    changed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.changed or self.missing or self.extra)

    def first(self) -> str:
        """One line naming the first difference."""
        if self.changed:
            return f"{self.changed[0]} changed"
        if self.missing:
            return f"{self.missing[0]} is missing"
        return f"{self.extra[0]} was added"


# (relative path, size, mtime_ns, inode, symlink target or None): what the quick check needs
QuickEntry = tuple[str, int | None, int | None, int | None, str | None]
QUICK_FORMAT = 1


def quick_entries(entries: dict[str, dict[str, Any]]) -> list[QuickEntry]:
    return [(rel, e.get("size"), e.get("mtime_ns"), e.get("ino"), e.get("target"))
            for rel, e in entries.items()]


def read_quick(root: Path, name: str, cache_dir: Path) -> list[QuickEntry] | None:
    """The quick check's view of root/name, from a marshal copy in cache_dir that is valid
    while the manifest file is the same (device, inode, size, mtime_ns, ctime_ns): parsing
    the JSON of a toolchain's ~20k entries cost 0.07 s of every build, the copy 0.015 s.
    None when there is no manifest."""
    path = root / name
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    key = (QUICK_FORMAT, st.st_dev, *FileSig.of(st))
    copy = cache_dir / f"quick-{root.name}.marshal"
    try:
        held_key, held = marshal.loads(copy.read_bytes())
        if tuple(held_key) == key:
            return held  # type: ignore[no-any-return]  # marshal: written by this function
    except (OSError, ValueError, EOFError, TypeError):
        pass  # none yet, or unreadable: made again below
    entries = quick_entries(json.loads(path.read_text())["files"])
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(copy, marshal.dumps((key, entries)), durable=False)
    except OSError:
        pass  # a read-only store still checks, from the JSON
    return entries


def quick_check(root: Path, entries: list[QuickEntry]) -> Changes:
    """lstat() every listed file: size, mtime and inode must be as written (a symlink: its
    target). Runs before every use of a toolchain (~20k files): one tight loop over tuples,
    paths joined as strings."""
    out = Changes()
    base = f"{root}/"
    lstat, readlink, is_link, is_reg = os.lstat, os.readlink, stat.S_ISLNK, stat.S_ISREG
    for rel, size, mtime_ns, ino, target in entries:
        path = base + rel
        try:
            st = lstat(path)
        except OSError:
            out.missing.append(rel)
            continue
        if target is not None:
            if not is_link(st.st_mode) or readlink(path) != target:
                out.changed.append(rel)
        elif st.st_size != size or st.st_mtime_ns != mtime_ns or st.st_ino != ino \
                or not is_reg(st.st_mode):
            out.changed.append(rel)
    return out


def full_check(root: Path, entries: dict[str, dict[str, Any]], name: str,
               exclude: Iterable[str] = ()) -> Changes:
    """Re-hash everything: changed content (even with the same size and mtime), missing
    files, and files that were not there when the manifest was written."""
    out = Changes()
    now = scan(root, [name, *exclude])
    for rel, e in entries.items():
        got = now.get(rel)
        if got is None:
            out.missing.append(rel)
        elif "target" in e:
            if got.get("target") != e["target"]:
                out.changed.append(rel)
        elif got.get("sha256") != e["sha256"] or got.get("exec") != e["exec"]:
            out.changed.append(rel)
    out.extra = sorted(set(now) - set(entries))
    return out
