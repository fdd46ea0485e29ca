"""Overlays and patches: applied to a tree in order, or to a copy made once under the store."""
from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from orchestrator.console import console
from orchestrator.errors import UserError
from orchestrator.fs import remove_tree
from orchestrator.hashing import digest_of, sha256_file
from orchestrator.model.source_archive import Overlay
from orchestrator.sources.archives import untar
from orchestrator.sources.prepared import IGNORED_DIRS, TREE_STAMP
from orchestrator.store.artifacts import Store


def patch_paths(spec: Any, recipes_dir: Path, recipe: str) -> list[Path]:
    """The spec's `patches` (relative to recipes/) as existing files, in order."""
    out = []
    for rel in spec.patches:
        p = (recipes_dir / rel).resolve()
        if not p.is_file():
            raise UserError(f"recipes/{recipe}.toml: source.patches names {rel!r}, "
                            f"which does not exist under recipes/; fix the path")
        out.append(p)
    return out


def patch_identity(patches: list[Path]) -> list[dict[str, str]]:
    return [{"name": p.name, "sha256": sha256_file(p)} for p in patches]


def apply_patch(tree: Path, patch: Path, what: str = "the pinned source") -> None:
    res = subprocess.run(["patch", "-p1", "--batch", "--forward", "--fuzz=0", "--no-backup-if-mismatch",
                          "-d", str(tree), "-i", str(patch)], capture_output=True, text=True)
    if res.returncode != 0:
        detail = (res.stdout + res.stderr).strip().splitlines()[-1:] or ["no output"]
        raise UserError(f"patch {patch.name} does not apply to {what}: {detail[0]}; "
                        "refresh the patch against this source")


def _patched_mtimes(tree: Path, patch: Path) -> dict[Path, float]:
    """mtimes of the existing files a -p1 patch names (its `+++ ` lines)."""
    out: dict[Path, float] = {}
    for line in patch.read_text(errors="replace").splitlines():
        if line.startswith("+++ "):
            name = line[4:].split("\t")[0].strip()
            rel = name.split("/", 1)[1] if "/" in name else name
            f = tree / rel
            if f.is_file():
                out[f] = f.stat().st_mtime
    return out


def apply_overlays(tree: Path, overlays: Sequence[tuple[Overlay, Path]], where: str) -> None:
    """Unpack each overlay at its path; it may only fill an empty or missing directory."""
    for o, path in overlays:
        dest = tree / o.path
        if dest.exists() and any(dest.iterdir()):
            raise UserError(f"overlay {o.file}: {o.path} is not empty in {where}; an "
                            "overlay may only fill an empty or missing directory")
        untar(path, dest, o.strip_components, o.archive_dir)


def patched_copy(src: Path, patches: list[Path], identity: dict[str, Any], recipe: str,
                 store: Store, ignore: tuple[str, ...] | Callable = IGNORED_DIRS,
                 overlays: list[tuple[Overlay, Path]] = (), what: str = "the pinned source",
                 keep_mtimes: bool = False) -> Path:
    """A copy of src (less `ignore`d directories) with overlays (their directories must be
    empty or missing in src) and patches applied, made once into <store>/sources/<key>-<recipe>/.

    keep_mtimes: a patched file's mtime becomes the newer of its original's and the patch
    file's, so a fresh copy of an unchanged file (a developer checkout after an edit
    elsewhere) does not look changed to ninja/CMake."""
    key = digest_of(identity)[:16]
    final = store.paths.sources / f"{key}-{recipe}"
    if (final / TREE_STAMP).is_file():
        return final
    with store.lock(f"source-{key}"):
        if (final / TREE_STAMP).is_file():
            return final
        with console.status(f"patching a copy of {src.name}"), store.staging(f"source-{key}") as tmp:
            tree = tmp / "tree"
            skip = ignore if callable(ignore) else shutil.ignore_patterns(*ignore)
            shutil.copytree(src, tree, symlinks=True, ignore=skip)
            apply_overlays(tree, overlays, str(src))
            for p in patches:
                before = _patched_mtimes(tree, p) if keep_mtimes else {}
                apply_patch(tree, p, what)
                for f, mtime in before.items():
                    if f.is_file():
                        newest = max(mtime, p.stat().st_mtime)
                        os.utime(f, (newest, newest))
            (tree / TREE_STAMP).write_text(digest_of(identity) + "\n")
            final.parent.mkdir(parents=True, exist_ok=True)
            if final.exists():
                remove_tree(final)
            os.rename(tree, final)
    return final
