"""The cache's per-artifact record (`ac/<artifact id>.json`): manifest, summary, packs, signature.

A record is trusted only after its signature checks out (orchestrator.cache.signing); this
model then refuses anything a malicious or broken record could use to write outside the
artifact: absolute paths, `..`, duplicate paths, files below symlinks, symlinks that resolve
outside the artifact, and ids that do not match the derivation.

Format /2 adds `packs`: small files' contents travel as members of `packs/<sha256>` files
(one zstd frame per content, concatenated), fewer requests than one `cas/` blob each. A pack
member is located by its frame's offset and length in the pack file, so a puller that needs
only some members asks for byte ranges. The layout is checked here as strictly as the paths:
members tile their pack exactly, name a content of the manifest once, and are bounded.
"""
from __future__ import annotations

import posixpath
import re
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from orchestrator.hashing import digest_of
from orchestrator.model.manifest import FileEntry, Manifest
from orchestrator.model.process_values import NAME_MAX, PATH_MAX
from orchestrator.model.recipe import NAME_RE
from orchestrator.model.store_layout import MANIFEST_NAME

RECORD_FORMAT: Final = "orchestrator-cache-record/1"
PACKED_FORMAT: Final = "orchestrator-cache-record/2"   # /1 + packs
MAX_PACKED_FILE = 1 << 20     # a packed content is held in memory: larger ones are cas/ blobs
MAX_PACK_SIZE = 256 << 20     # bytes of one pack file
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


def max_wire(size: int) -> int:
    """More compressed bytes than this for `size` bytes of content means a hostile server
    or record (zstd's worst case is about size + size/256 + a few hundred bytes)."""
    return size + size // 128 + 4096


class PackMember(BaseModel):
    """One content inside a pack: its zstd frame is `length` bytes at `offset` of the pack."""
    model_config = ConfigDict(extra="forbid")
    sha256: str
    offset: int
    length: int


class Pack(BaseModel):
    """`packs/<sha256>`: the frames of `members`, back to back; `size` bytes in all."""
    model_config = ConfigDict(extra="forbid")
    sha256: str         # of the pack file's bytes (its name)
    size: int
    members: list[PackMember]


def packs_problem(packs: list[Pack], sizes: dict[str, int]) -> str | None:
    """First reason a record's packs cannot be trusted to place its contents, or None.
    `sizes`: the manifest's contents (sha256 -> size)."""
    placed: set[str] = set()
    names: set[str] = set()
    for n, pack in enumerate(packs):
        if not SHA256_RE.match(pack.sha256) or pack.sha256 in names:
            return f"pack {n}: its name is not 64 hex or repeats"
        names.add(pack.sha256)
        if not pack.members or not 0 < pack.size <= MAX_PACK_SIZE:
            return f"pack {pack.sha256[:16]}: no members, or size {pack.size} out of bounds"
        end = 0
        for i, m in enumerate(pack.members):
            where = f"pack {pack.sha256[:16]} member {i}"
            if m.sha256 not in sizes:
                return f"{where}: {m.sha256[:64]!r} is no file content of the manifest"
            if m.sha256 in placed:
                return f"{where}: content {m.sha256[:16]} is placed twice"
            placed.add(m.sha256)
            if m.offset != end:
                return f"{where}: offset {m.offset} is not where the previous frame ends ({end})"
            size = sizes[m.sha256]
            if size > MAX_PACKED_FILE or not 0 < m.length <= max_wire(size):
                return f"{where}: length {m.length} for {size} bytes of content is out of bounds"
            end += m.length
        if end != pack.size:
            return f"pack {pack.sha256[:16]}: members end at {end}, the pack is {pack.size} bytes"
    return None


class ContentSummary(BaseModel):
    """What a reviewer of a record (an artifact's, a toolchain's) sees without reading its
    file list: how many files, bytes and distinct blobs."""
    model_config = ConfigDict(extra="forbid")
    files: int
    bytes: int
    blobs: int


class Summary(ContentSummary):
    """An artifact record's summary: its contents and the digest of its derivation."""
    derivation_sha256: str


# A relative, normalized path without control characters: no empty, "." or ".." component.
PLAIN_PATH_RE = re.compile(r"(?!\.\.?(?:/|$))[^/\x00-\x1f\x7f]+(?:/(?!\.\.?(?:/|$))[^/\x00-\x1f\x7f]+)*")


def path_problem(path: str, reserved: str = MANIFEST_NAME) -> str | None:
    """Why a manifest path is unsafe to create below the artifact dir, or None."""
    if (len(path) <= NAME_MAX and path.isascii() and PLAIN_PATH_RE.fullmatch(path)
            and path != reserved):
        return None  # the common case in one match; the checks below name what is wrong
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
    clear: set[str] = set()  # directories known to be neither a file nor a symlink here
    for f in entries:
        bad = path_problem(f.path, reserved)
        if bad:
            return f"{bad}: {f.path!r}"
        if f.path in seen:
            return f"duplicate path {f.path!r}"
        seen.add(f.path)
        chain: list[str] = []
        parent = f.path
        while (cut := parent.rfind("/")) > 0 and (parent := parent[:cut]) not in clear:
            chain.append(parent)
        for parent in reversed(chain):  # the topmost first
            if parent in links:
                return f"{f.path!r} lies below the symlink {parent!r}"
            if parent in files:
                return f"{f.path!r} lies below the file {parent!r}"
        clear.update(chain)
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
    """One artifact in the cache. `manifest.files[*].sha256` name the contents: a member of
    one of `packs` (format /2), else the `cas/` blob of that name."""
    model_config = ConfigDict(extra="forbid")
    format: Literal["orchestrator-cache-record/1", "orchestrator-cache-record/2"] = RECORD_FORMAT
    id: str
    name: str
    summary: Summary
    manifest: Manifest
    packs: list[Pack] = []
    signature: Signature | None = None

    @model_validator(mode="after")
    def _consistent(self) -> CacheRecord:
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
        if self.packs and self.format == RECORD_FORMAT:
            raise ValueError(f"a {RECORD_FORMAT} record has no packs")
        if self.packs:
            sizes = {f.sha256 or "": f.size for f in self.manifest.files if f.kind == "file"}
            if (problem := packs_problem(self.packs, sizes)) is not None:
                raise ValueError(problem)
        return self

    @classmethod
    def for_manifest(cls, manifest: Manifest, packs: list[Pack] | None = None) -> CacheRecord:
        """An unsigned record describing a committed artifact's manifest (and its packs)."""
        blobs = {f.sha256 for f in manifest.files if f.kind == "file"}
        return cls(format=PACKED_FORMAT if packs else RECORD_FORMAT, id=manifest.id,
                   name=manifest.name, manifest=manifest, packs=packs or [],
                   summary=Summary(derivation_sha256=digest_of(manifest.derivation),
                                   files=len(manifest.files), bytes=manifest.total_size(),
                                   blobs=len(blobs)))

    def payload(self) -> dict[str, Any]:
        """The signed part: everything but the signature, as plain JSON values (a record
        without packs leaves the field out: it reads as format /1 everywhere)."""
        exclude = {"signature"} if self.packs else {"signature", "packs"}
        return self.model_dump(mode="json", exclude=exclude)

    def document(self) -> dict[str, Any]:
        """What is written to the cache: the payload and its signature."""
        doc = self.payload()
        if self.signature is not None:
            doc["signature"] = self.signature.model_dump(mode="json")
        return doc

    def pack_members(self) -> dict[str, tuple[Pack, int]]:
        """Content sha256 -> (its pack, its index there), for packed contents."""
        return {m.sha256: (p, i) for p in self.packs for i, m in enumerate(p.members)}

    def blobs(self) -> dict[str, FileEntry]:
        """One file entry per distinct content hash (the first path that has it)."""
        out: dict[str, FileEntry] = {}
        for f in self.manifest.files:
            if f.kind == "file" and f.sha256 not in out:
                out[f.sha256 or ""] = f
        return out
