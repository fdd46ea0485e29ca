"""The cache's per-artifact record (`ac/<artifact id>.json`): manifest, summary, signature.

A record is trusted only after its signature checks out (orchestrator.cache.signing); this
model then refuses anything a malicious or broken record could use to write outside the
artifact: absolute paths, `..`, duplicate paths, files below symlinks, symlinks that resolve
outside the artifact, and ids that do not match the derivation.
"""
from __future__ import annotations

import posixpath
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from orchestrator.hashing import digest_of
from orchestrator.model.manifest import MANIFEST_NAME, FileEntry, Manifest
from orchestrator.model.process_values import NAME_MAX, PATH_MAX
from orchestrator.model.recipe import NAME_RE

RECORD_FORMAT = "orchestrator-cache-record/1"
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
ID_RE = re.compile(r"^[0-9a-f]{40}$")
MAX_SYMLINK_HOPS = 40
# A path inside an artifact, leaving room below PATH_MAX for <store>/tmp/<staging>/.
MAX_RELATIVE_PATH = PATH_MAX - 1024
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


class Signature(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str            # the signing key's name, e.g. "team-1"
    sig: str            # base64 ed25519 signature of the record without this field


class Summary(BaseModel):
    """What a reviewer wants to see without reading the whole manifest."""
    model_config = ConfigDict(extra="forbid")
    derivation_sha256: str
    files: int
    bytes: int
    blobs: int


def path_problem(path: str, reserved: str = MANIFEST_NAME) -> str | None:
    """Why a manifest path is unsafe to create below the artifact dir, or None."""
    if not path or "\0" in path:
        return "empty path or NUL byte"
    if CONTROL_RE.search(path):
        return "path contains a control character"
    raw = path.encode("utf-8", "surrogateescape")
    if len(raw) > MAX_RELATIVE_PATH:
        return f"path is {len(raw)} bytes (at most {MAX_RELATIVE_PATH})"
    if any(len(p) > NAME_MAX for p in raw.split(b"/")):
        return f"path has a component over {NAME_MAX} bytes"
    if path.startswith("/"):
        return "absolute path"
    parts = path.split("/")
    if any(p == ".." for p in parts):
        return "path contains '..'"
    if any(p in ("", ".") for p in parts) or posixpath.normpath(path) != path:
        return "path is not normalized"
    if path == reserved:
        return f"path would overwrite {reserved}"
    return None


def escapes(link_path: str, target: str, links: dict[str, str]) -> bool:
    """Would following `target` from the symlink at `link_path` leave the artifact?

    Resolves component by component, expanding symlinks of the same artifact like the
    kernel does, so `a/../..` through a symlinked `a` is caught too.
    """
    if not target or target.startswith("/"):
        return True
    stack = link_path.split("/")[:-1]
    queue = target.split("/")
    hops = 0
    while queue:
        part = queue.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not stack:
                return True
            stack.pop()
            continue
        stack.append(part)
        here = "/".join(stack)
        if here in links:
            hops += 1
            nxt = links[here]
            if hops > MAX_SYMLINK_HOPS or not nxt or nxt.startswith("/"):
                return True
            stack.pop()
            queue = nxt.split("/") + queue
    return False


def target_problem(target: str | None) -> str | None:
    """Why a symlink target cannot be created as written (the kernel's limits), or None."""
    if not target:
        return "empty target"
    if "\0" in target or CONTROL_RE.search(target):
        return "target contains a NUL or control character"
    raw = target.encode("utf-8", "surrogateescape")
    if len(raw) >= PATH_MAX or any(len(p) > NAME_MAX for p in raw.split(b"/")):
        return "target is longer than the kernel allows"
    return None


def names_problem(manifest: Manifest) -> str | None:
    """Recipe and variant must be names a local recipe could have (they name store paths)."""
    for what, value in (("recipe", manifest.recipe), ("variant", manifest.variant)):
        if not re.match(NAME_RE, value):
            return f"{what} name {value[:80]!r} is not a valid name (must match {NAME_RE})"
    return None


def manifest_problem(manifest: Manifest) -> str | None:
    """First reason the manifest's names or file list are unsafe to materialize, or None."""
    return names_problem(manifest) or files_problem(manifest.files)


def files_problem(entries: list[FileEntry], outside_ok: frozenset[str] = frozenset(),
                  reserved: str = MANIFEST_NAME) -> str | None:
    """First reason a file list is unsafe to create below one directory, or None.
    `outside_ok`: symlink paths whose (absolute) target a caller checks itself."""
    seen: set[str] = set()
    files = {f.path for f in entries if f.kind == "file"}
    links = {f.path: f.target or "" for f in entries if f.kind == "symlink"}
    inside = {p: t for p, t in links.items() if p not in outside_ok}  # followed by escapes()
    for f in entries:
        bad = path_problem(f.path, reserved)
        if bad:
            return f"{bad}: {f.path!r}"
        if f.path in seen:
            return f"duplicate path {f.path!r}"
        seen.add(f.path)
        parts = f.path.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            if parent in links:
                return f"{f.path!r} lies below the symlink {parent!r}"
            if parent in files:
                return f"{f.path!r} lies below the file {parent!r}"
        if f.kind == "file":
            if not SHA256_RE.match(f.sha256 or "") or f.size < 0 or f.target is not None:
                return f"file entry {f.path!r} needs a sha256, a size and no target"
        elif (bad_target := target_problem(f.target)) is not None:
            return f"symlink {f.path!r}: {bad_target}"
        elif f.path in outside_ok:
            continue
        elif f.target is None or escapes(f.path, f.target, inside):
            return f"symlink {f.path!r} -> {f.target!r} escapes the artifact"
    return None


class CacheRecord(BaseModel):
    """One artifact in the cache. `manifest.files[*].sha256` name the `cas/` blobs."""
    model_config = ConfigDict(extra="forbid")
    format: Literal["orchestrator-cache-record/1"] = RECORD_FORMAT
    id: str
    name: str
    summary: Summary
    manifest: Manifest
    signature: Signature | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "CacheRecord":
        if not ID_RE.match(self.id):
            raise ValueError(f"artifact id {self.id!r} is not 40 hex chars")
        if self.manifest.id != self.id or self.manifest.name != self.name:
            raise ValueError("record id/name do not match its manifest")
        if digest_of(self.manifest.derivation)[:40] != self.id:
            raise ValueError("artifact id is not the hash of the record's derivation")
        if self.summary.derivation_sha256 != digest_of(self.manifest.derivation):
            raise ValueError("summary does not match the derivation")
        problem = manifest_problem(self.manifest)
        if problem:
            raise ValueError(problem)
        return self

    @classmethod
    def for_manifest(cls, manifest: Manifest) -> "CacheRecord":
        """An unsigned record describing a committed artifact's manifest."""
        blobs = {f.sha256 for f in manifest.files if f.kind == "file"}
        return cls(id=manifest.id, name=manifest.name, manifest=manifest,
                   summary=Summary(derivation_sha256=digest_of(manifest.derivation),
                                   files=len(manifest.files), bytes=manifest.total_size(),
                                   blobs=len(blobs)))

    def payload(self) -> dict[str, Any]:
        """The signed part: everything but the signature, as plain JSON values."""
        return self.model_dump(mode="json", exclude={"signature"})

    def blobs(self) -> dict[str, FileEntry]:
        """One file entry per distinct content hash (the first path that has it)."""
        out: dict[str, FileEntry] = {}
        for f in self.manifest.files:
            if f.kind == "file" and f.sha256 not in out:
                out[f.sha256 or ""] = f
        return out
