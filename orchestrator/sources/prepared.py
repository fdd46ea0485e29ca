"""What every source kind produces (`PreparedSource`) and what no source identity includes."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.hashing import StatCache
from orchestrator.store.artifacts import Store

# Never part of a source's identity: VCS metadata and build output left in the tree.
IGNORED_DIRS = (".git", ".hg", "build", "__pycache__", ".orch", ".vscode", ".cache")
# Files `doit vscode` / `doit switch` write at a source root (CMake reads presets only there).
IGNORED_FILES = ("CMakePresets.json", ".lldbinit", ".gdbinit", "compile_commands.json")
# Written last into a tree made under <store>/sources/: its presence means the tree is whole.
TREE_STAMP = ".orch-source.json"


@dataclass
class PreparedSource:
    dir: Path
    identity: dict[str, Any]
    # Recorded for debuggers: the logical root debug info uses for this source.
    extra: dict[str, Any] = field(default_factory=dict)


def stat_cache(store: Store) -> StatCache:
    """The store's stat cache for source files (size, mtime, inode → sha256)."""
    return StatCache(store.paths.source_stat_cache)


def is_workspace_plumbing(rel: str) -> bool:
    """.orch/, .vscode/, compile_commands.json, ...: what switch/vscode write, never source."""
    parts = rel.split("/")
    return parts[0] in IGNORED_DIRS or (len(parts) == 1 and parts[0] in IGNORED_FILES)


def is_workspace_link(path: Path) -> bool:
    """A symlink through some .orch/profile: workspace plumbing, not part of a source."""
    return path.is_symlink() and ".orch/profile/" in os.readlink(path) + "/"
