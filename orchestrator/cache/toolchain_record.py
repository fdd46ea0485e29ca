"""The cache's record of a materialized toolchain (`tc/<toolchain hash>.json`).

A toolchain is content-addressed by its lock's digest, so a teammate's copy of the same lock
can be used instead of installing the wheels and debs again. Its files are the same `cas/`
blobs artifacts use (deduped with them). Two things differ from an artifact's record:

- `root`: the absolute path the toolchain had when pushed. Only the files listed in
  `relocate` contain it, all of them text (no NUL byte); the puller rewrites it to its own
  path. A toolchain holding its path inside a binary file is never pushed.
- the venv's interpreter links (`venv/bin/python*`) may point at `python`, the lock's
  interpreter (an absolute path); the puller accepts that only if it is its own lock's.
"""
from __future__ import annotations

import posixpath
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from orchestrator.model.cache_record import CONTROL_RE, SHA256_RE, ContentSummary, Signature, files_problem
from orchestrator.model.manifest import FileEntry
from orchestrator.model.process_values import PATH_MAX

TOOLCHAIN_RECORD_FORMAT = "orchestrator-toolchain-record/1"
HASH_RE = re.compile(r"^[0-9a-f]{32}$")
INTERPRETER_LINK = re.compile(r"^venv/bin/python[0-9.]*$")
FILES_MANIFEST = "toolchain-files.json"  # toolchain.FILES_MANIFEST: rewritten by the puller


def toolchain_record_key(toolchain_hash: str) -> str:
    return f"tc/{toolchain_hash}.json"


def absolute_problem(path: str, what: str) -> str | None:
    """Why `path` is not a plain absolute path this machine could have, or None."""
    if not path.startswith("/") or posixpath.normpath(path) != path or path == "/":
        return f"{what} {path[:200]!r} is not a normalized absolute path"
    if CONTROL_RE.search(path) or len(path.encode("utf-8", "surrogateescape")) > PATH_MAX // 2:
        return f"{what} has a control character or is too long"
    return None


class ToolchainRecord(BaseModel):
    """One materialized toolchain in the cache; `files[*].sha256` name the `cas/` blobs."""
    model_config = ConfigDict(extra="forbid")
    format: Literal["orchestrator-toolchain-record/1"] = TOOLCHAIN_RECORD_FORMAT
    hash: str                   # toolchain_hash(lock): the first 32 hex of lock_digest
    lock: str                   # the lock's name (informational)
    lock_digest: str
    root: str                   # absolute root at push time, rewritten on pull
    python: str                 # the lock's interpreter, target of venv/bin/python*
    relocate: list[str]         # text files that contain `root`
    summary: ContentSummary
    files: list[FileEntry]
    signature: Signature | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ToolchainRecord:
        if not HASH_RE.match(self.hash) or not SHA256_RE.match(self.lock_digest):
            raise ValueError("hash must be 32 hex and lock_digest 64 hex")
        if self.lock_digest[:32] != self.hash:
            raise ValueError("toolchain hash is not the prefix of its lock digest")
        for value, what in ((self.root, "root"), (self.python, "python")):
            if (bad := absolute_problem(value, what)) is not None:
                raise ValueError(bad)
        outside = frozenset(f.path for f in self.files if f.kind == "symlink"
                            and INTERPRETER_LINK.match(f.path) and f.target == self.python)
        if (bad := files_problem(self.files, outside, FILES_MANIFEST)) is not None:
            raise ValueError(bad)
        kinds = {f.path: f.kind for f in self.files}
        for rel in self.relocate:
            if kinds.get(rel) != "file":
                raise ValueError(f"relocate names {rel[:200]!r}, which is not a file of the record")
        if len(set(self.relocate)) != len(self.relocate):
            raise ValueError("relocate lists a file twice")
        if "toolchain.json" not in kinds:
            raise ValueError("the record has no toolchain.json")
        return self

    def payload(self) -> dict[str, Any]:
        """The signed part: everything but the signature, as plain JSON values."""
        return self.model_dump(mode="json", exclude={"signature"})

    def blobs(self) -> dict[str, FileEntry]:
        """One file entry per distinct content hash (the first path that has it)."""
        out: dict[str, FileEntry] = {}
        for f in self.files:
            if f.kind == "file" and f.sha256 not in out:
                out[f.sha256 or ""] = f
        return out
