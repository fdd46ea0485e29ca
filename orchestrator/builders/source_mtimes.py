"""The build tree agrees with the source's content, not only its clock: before cmake/ninja
run, a source file that changed since the tree's last build but whose mtime is not newer than
that build (`cp -p`, `tar x`, `rsync -a`, a restore from backup) gets the current time, so
ninja rebuilds what depends on it. ninja compares mtimes; the artifact id hashes content.

The tree keeps (SEEN, marshal) the stat and sha256 of every source file as they were when
its last ninja finished, and when that was. A file is touched when its stat (size, mtime,
inode, ctime: `cp -p` cannot set ctime) differs from the one seen, its mtime is not after the
end of that build and its content differs; an ordinary edit's mtime is after, and it is left
alone (so the head start of an edit's build keeps running). A new file with an old mtime is
touched too (a header that now shadows another). A tree without SEEN (a new one) builds everything anyway.
"""
from __future__ import annotations

import contextlib
import marshal
import os
import stat
import time
from pathlib import Path

from orchestrator.fs import FileSig, write_atomic
from orchestrator.hashing import sha256_file

SEEN = ".orch-source-seen.marshal"
FORMAT = 1
SKIPPED_DIRS = frozenset({".git", ".hg", "__pycache__"})
# Build output and workspace plumbing at a source's root (sources/prepared.IGNORED_DIRS).
SKIPPED_AT_ROOT = frozenset({"build", ".orch", ".vscode", ".cache"})

StatSig = tuple[int, int, int, int]  # size, mtime_ns, inode, ctime_ns
Seen = tuple[int, int, int, int, str]  # ... and sha256


def source_stats(root: Path) -> dict[str, StatSig]:
    """rel path -> stat of every regular file below root, build output and VCS data left out.
    Symlinks are not followed: a link's target in the tree is seen as itself, and one outside
    it (a workspace link into .orch/profile, i.e. the store) is never touched through."""
    out: dict[str, StatSig] = {}
    stack = [""]
    base = str(root)
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(f"{base}/{rel_dir}" if rel_dir else base) as it:
                found = list(it)
        except OSError:
            continue
        for e in found:
            rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
            try:
                if e.is_dir(follow_symlinks=False):
                    if e.name not in SKIPPED_DIRS and not (not rel_dir and e.name in SKIPPED_AT_ROOT):
                        stack.append(rel)
                    continue
                if e.is_symlink():
                    continue
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                out[rel] = FileSig.of(st)
    return out


def _read_seen(build_dir: Path, source_dir: Path) -> tuple[int, dict[str, Seen]] | None:
    try:
        fmt, source, ended_ns, files = marshal.loads((build_dir / SEEN).read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if fmt != FORMAT or source != str(source_dir) or not isinstance(files, dict):
        return None
    return ended_ns, files


def record(source_dir: Path, build_dir: Path) -> None:
    """After a finished ninja: the source's stat and content as they are now (files a build
    writes into the source, PyTorch's codegen, as written) and when that ninja ended. Only
    files whose stat changed since the last record are hashed."""
    ended = time.time_ns()
    before = _read_seen(build_dir, source_dir)
    old = before[1] if before else {}
    files: dict[str, Seen] = {}
    for rel, sig in source_stats(source_dir).items():
        had = old.get(rel)
        if had is not None and tuple(had[:4]) == sig:
            files[rel] = had
            continue
        try:
            files[rel] = (*sig, sha256_file(source_dir / rel))
        except OSError:
            continue
    data = marshal.dumps((FORMAT, str(source_dir), ended, files))
    with contextlib.suppress(OSError):  # a tree without it builds what it must anyway
        write_atomic(build_dir / SEEN, data, durable=False)


def stale_by_mtime(source_dir: Path, build_dir: Path) -> list[str]:
    """Files whose content changed since the tree's last build and whose mtime ninja would
    not see as new (a re-copy with mtimes kept changes every inode, not the content)."""
    seen = _read_seen(build_dir, source_dir)
    if seen is None:
        return []
    ended_ns, files = seen
    out = []
    for rel, sig in source_stats(source_dir).items():
        had = files.get(rel)
        if sig[1] > ended_ns or (had is not None and tuple(had[:4]) == sig):
            continue
        try:
            if had is None or sha256_file(source_dir / rel) != had[4]:
                out.append(rel)
        except OSError:
            continue
    return sorted(out)


def agree(source_dir: Path, build_dir: Path) -> list[str]:
    """Touch the changed files ninja would take for unchanged; their paths, relative to the
    source."""
    touched = stale_by_mtime(source_dir, build_dir)
    for rel in touched:
        os.utime(source_dir / rel)  # the owner may set it even on a read-only file
    return touched
