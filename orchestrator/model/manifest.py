"""manifest.json: what an artifact is (its derivation) and what it holds (every file)."""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from orchestrator.hashing import known_sha256
from orchestrator.model.store_layout import MANIFEST_NAME  # noqa: F401 - the name with its model


class FileEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str                       # relative to the artifact dir, posix
    kind: Literal["file", "symlink"]
    size: int = 0
    mode: int = 0o644               # 0o755 or 0o644 for files; the store adds read-only
    sha256: str | None = None
    target: str | None = None       # symlinks only


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: Literal[1] = 1
    id: str
    recipe: str
    variant: str
    derivation: dict[str, Any]
    files: list[FileEntry]
    prefix_map: dict[str, str] = {}
    timings: dict[str, float] = {}
    verify: dict[str, Any] | None = None
    origin: dict[str, Any] = {}

    @property
    def name(self) -> str:
        return f"{self.id}-{self.recipe}-{self.variant}"

    def total_size(self) -> int:
        return sum(f.size for f in self.files)

    @staticmethod
    def scan_files(root: Path) -> list[FileEntry]:
        """Every file and symlink under root (manifest.json excluded), sorted by path. A file
        whose inode this process already hashed (`hashing.remember_sha256`) is not read."""
        entries: list[FileEntry] = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames + [d for d in dirnames
                                            if os.path.islink(os.path.join(dirpath, d))]):
                p = Path(dirpath) / name
                rel = p.relative_to(root).as_posix()
                if rel == MANIFEST_NAME:
                    continue
                st = p.lstat()
                if stat.S_ISLNK(st.st_mode):
                    entries.append(FileEntry(path=rel, kind="symlink", target=os.readlink(p)))
                elif stat.S_ISREG(st.st_mode):
                    mode = 0o755 if st.st_mode & 0o111 else 0o644
                    entries.append(FileEntry(path=rel, kind="file", size=st.st_size, mode=mode,
                                             sha256=known_sha256(p, st)))
        entries.sort(key=lambda e: e.path)
        return entries
