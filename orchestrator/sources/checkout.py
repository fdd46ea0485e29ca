"""Developer checkouts (`source=PATH`): identified cheaply, built in place or copied.

The identity is HEAD's commit, the hash of `git diff HEAD` (git's index already caches
file stats), and the untracked files, hashed through the stat cache; dirty submodules
recurse. A no-op run reads no file contents. A tree that is not a git checkout is hashed
whole (stat-cached).
"""
from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.errors import UserError
from orchestrator.hashing import StatCache, digest_of, sha256_bytes, tree_digest
from orchestrator.memo.file_reads import recorded
from orchestrator.sources.prepared import (
    IGNORED_DIRS,
    PreparedSource,
    is_workspace_link,
    is_workspace_plumbing,
    stat_cache,
)
from orchestrator.store.artifacts import Store


def _git(path: Path, *args: str) -> bytes:
    res = subprocess.run(["git", "-c", f"safe.directory={path}", "-C", str(path), *args],
                         capture_output=True)
    if res.returncode != 0:
        raise UserError(f"git {' '.join(args[:2])} failed in {path}: "
                        f"{res.stderr.decode(errors='replace').strip()[-200:]}")
    return res.stdout


def checkout_identity(path: Path, cache: StatCache, rev: str | None = None) -> dict[str, Any]:
    """HEAD (`rev` when the caller has it) + diff hash + untracked files (stat-cached) + dirty
    submodules, recursively."""
    if rev is None:
        rev = _git(path, "rev-parse", "HEAD").decode().strip()
    # status refreshes git's index stat data, which makes the diff below cheap.
    status = _git(path, "status", "--porcelain=v2", "-z", "--untracked-files=all",
                  "--ignore-submodules=none").split(b"\0")
    untracked: list[list[str]] = []
    dirty_subs: dict[str, Any] = {}
    tracked_changes = False  # a changed, renamed or unmerged entry: `git diff HEAD` has output
    skip_next = False
    for rec in status:
        if skip_next:  # rename records carry the original path as the next field
            skip_next = False
            continue
        if not rec:
            continue
        text = rec.decode(errors="surrogateescape")
        if text.startswith("? "):
            rel = text[2:]
            f = path / rel
            if is_workspace_plumbing(rel) or is_workspace_link(f):
                continue
            if f.is_symlink():
                untracked.append([rel, "l", os.readlink(f)])
            elif f.is_file():
                untracked.append([rel, "x" if os.access(f, os.X_OK) else "f", cache.sha256(f)])
        elif text[:2] in ("1 ", "2 ", "u "):
            tracked_changes = True
            if text.startswith("u "):
                continue
            fields = text.split(" ")
            sub = fields[2]
            if text.startswith("2 "):
                skip_next = True
            if sub.startswith("S") and sub != "S...":
                rel = " ".join(fields[9 if text.startswith("2 ") else 8:])
                dirty_subs[rel] = checkout_identity(path / rel, cache)
    # A clean index and tree (status lists no tracked change) have no diff: not run (0.04 s
    # on PyTorch's 11k files, every no-op build of a checkout).
    diff = _git(path, "diff", "HEAD", "--binary", "--no-ext-diff", "--no-textconv",
                "--ignore-submodules=all") if tracked_changes else b""
    return {
        "kind": "git-checkout",
        "rev": rev,
        "diff_sha256": sha256_bytes(diff),
        "untracked_sha256": digest_of(sorted(untracked)),
        "dirty_submodules": dirty_subs,
    }


def checkout_dir(raw: str) -> Path:
    src = Path(raw).expanduser()
    src = (src if src.is_absolute() else Path.cwd() / src).resolve()
    if not src.is_dir():
        raise UserError(f"source={raw}: directory {src} does not exist; fix the path")
    return src


def tree_identity(src: Path, cache: StatCache) -> dict[str, Any]:
    """A checkout's identity: git-aware in a git checkout's top level, else the tree's hash.
    One `git rev-parse --show-toplevel HEAD` answers both whether it is one and its HEAD."""
    res = subprocess.run(["git", "-c", f"safe.directory={src}", "-C", str(src), "rev-parse",
                          "--show-toplevel", "HEAD"], capture_output=True, text=True)
    lines = res.stdout.splitlines()
    if lines and Path(lines[0]).resolve() == src.resolve():
        # no HEAD yet (a repository without a commit): checkout_identity says so
        return checkout_identity(src, cache, lines[1] if res.returncode == 0 and len(lines) == 2
                                 else None)
    return {"kind": "path", "tree_sha256": tree_digest(src, cache, IGNORED_DIRS)}


def prepare_checkout(raw: str, store: Store) -> PreparedSource:
    """A developer's own tree given as source=PATH (git-aware identity; dirty trees allowed)."""
    src = checkout_dir(raw)
    cache = stat_cache(store)
    # A plan memo computes it again (git and the stat cache) instead of noting the files.
    ident = recorded("checkout", [str(src)], lambda: tree_identity(src, cache))
    cache.save()
    extra = {"checkout": True, "git_rev": ident.get("rev")}
    return PreparedSource(dir=src, identity=ident, extra=extra)


def checkout_ignore(root: Path) -> Callable[[str, list[str]], set[str]]:
    """What a checkout's copy leaves out: workspace plumbing and build output at the root
    (.orch, .vscode, build, ... as the identity does), VCS data, __pycache__ and the
    workspace's links into .orch/profile anywhere (a submodule's `.git` file would point
    outside the copy). A nested directory named `build`
    (PyTorch has tools/build/) is source and is copied."""
    def skip(d: str, names: list[str]) -> set[str]:
        top = Path(d) == root
        return {n for n in names if n in (".git", ".hg", "__pycache__")
                or (top and is_workspace_plumbing(n)) or is_workspace_link(Path(d) / n)}
    return skip
