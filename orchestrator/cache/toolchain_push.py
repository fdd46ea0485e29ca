"""Push a materialized toolchain: its files as `cas/` blobs, then the signed `tc/` record.

The file list and hashes come from the toolchain's own toolchain-files.json (checked by lstat
first; each uploaded blob is re-hashed while compressing). Files that contain the
toolchain's absolute path are listed for relocation; one that holds it in binary data makes
the push fail, since rewriting a path inside a binary is not safe.
"""
from __future__ import annotations

import mmap
import time
from pathlib import Path

from pydantic import ValidationError

from orchestrator.cache.backends import open_backend
from orchestrator.cache.blob_upload import upload_blobs
from orchestrator.cache.cache_toml import CacheConfig
from orchestrator.cache.errors import CacheError
from orchestrator.cache.signing import SecretKey
from orchestrator.cache.toolchain_record import ToolchainRecord, toolchain_record_key
from orchestrator.cache.transfer import TransferStats
from orchestrator.console import working
from orchestrator.hashing import pretty_json
from orchestrator.model.cache_record import ContentSummary, Signature
from orchestrator.model.lock import Lock, PythonEntry
from orchestrator.model.manifest import FileEntry
from orchestrator.store import tree_manifest
from orchestrator.toolchain.materialize import FILES_MANIFEST, check_toolchain, toolchain_hash


def _holds(path: Path, needle: bytes) -> tuple[bool, bool]:
    """(contains needle, contains a NUL byte) without reading the file into memory."""
    with open(path, "rb") as f:
        try:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # empty file
            return False, False
        with mm:
            if mm.find(needle) == -1:
                return False, False
            return True, mm.find(b"\0") != -1


def written_root(root: Path) -> str:
    """The path the toolchain was materialized at (what its files contain): the venv's
    `command = ... -m venv <root>/venv` line, else `root` (a store reached through a link
    differs from it)."""
    try:
        for line in (root / "venv" / "pyvenv.cfg").read_text().splitlines():
            key, _, value = line.partition("=")
            venv = value.strip().rpartition(" -m venv ")[2]
            if key.strip() == "command" and venv.endswith(f"/{root.name}/venv"):
                return venv.removesuffix("/venv")
    except OSError:
        pass
    return str(root)


def toolchain_files(root: Path, written: str) -> tuple[list[FileEntry], list[str]]:
    """The toolchain's files (from its manifest) and those that contain `written`, its path."""
    entries = tree_manifest.read(root, FILES_MANIFEST)
    if entries is None:
        raise CacheError(f"cannot push toolchain {root}: it has no {FILES_MANIFEST}; remove it "
                         "and materialize it again")
    check_toolchain(root)
    needle = written.encode()
    files: list[FileEntry] = []
    relocate: list[str] = []
    for rel, e in sorted(entries.items()):
        if "target" in e:
            files.append(FileEntry(path=rel, kind="symlink", target=e["target"]))
            continue
        files.append(FileEntry(path=rel, kind="file", size=e["size"], sha256=e["sha256"],
                               mode=0o755 if e["exec"] else 0o644))
        found, binary = _holds(root / rel, needle)
        if found and binary:
            raise CacheError(f"cannot push toolchain {root.name}: {rel} holds the toolchain's "
                             "path inside binary data, which cannot be relocated safely")
        if found:
            relocate.append(rel)
    return files, relocate


def signed_toolchain_record(root: Path, lock: Lock, key: SecretKey) -> ToolchainRecord:
    py = lock.entries.get("python")
    if not isinstance(py, PythonEntry):
        raise CacheError(f"lock {lock.name!r} has no python entry; run `doit lock`")
    written = written_root(root)
    files, relocate = toolchain_files(root, written)
    digest = lock.digest()
    if toolchain_hash(lock) != root.name:
        raise CacheError(f"{root} is not the toolchain of lock {lock.name} ({toolchain_hash(lock)})")
    try:
        record = ToolchainRecord(
            hash=root.name, lock=lock.name, lock_digest=digest, root=written, python=py.path,
            relocate=relocate, files=files,
            summary=ContentSummary(files=len(files), bytes=sum(f.size for f in files),
                                     blobs=len({f.sha256 for f in files if f.kind == "file"})))
    except ValidationError as e:
        msg = str(e.errors()[0]["msg"]).removeprefix("Value error, ")
        raise CacheError(f"cannot push toolchain {root.name}: {msg}") from None
    return record.model_copy(update={"signature": Signature(**key.sign(record.payload()))})


def push_toolchain(root: Path, lock: Lock, config: CacheConfig, key: SecretKey,
                   url: str | None = None, stats: TransferStats | None = None) -> ToolchainRecord:
    """Upload the toolchain's missing blobs (HEAD first), then its record last."""
    stats = stats if stats is not None else TransferStats()
    target = url or config.push_url
    if not target:
        raise CacheError("no cache to push to: set push (or substituters) in cache.toml")
    start = time.monotonic()
    with working(f"push toolchain {root.name[:12]}: checking its files"):
        record = signed_toolchain_record(root, lock, key)
    backend = open_backend(target, config)
    try:
        blobs = [(sha, f.size, root / f.path) for sha, f in record.blobs().items()]
        upload_blobs(backend, blobs, config.jobs, f"push toolchain {record.hash[:12]}", stats)
        body = pretty_json(record.model_dump(mode="json")).encode()
        backend.put(toolchain_record_key(record.hash), lambda: [body])
    finally:
        backend.close()
    stats.seconds = time.monotonic() - start
    return record
