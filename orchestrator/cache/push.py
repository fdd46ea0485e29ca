"""Push: upload missing packs and blobs (HEAD first), then the signed record last.

Small contents go into packs (cache/pack_upload.py), the others are `cas/` blobs. A record
only ever names packs and blobs that are already in the cache, so a reader never sees a
half-pushed artifact. Two pushers of the same artifact write the same blobs (same names,
same bytes; a pack's name is the hash of its bytes) and each record PUT replaces the file
atomically: one consistent record wins.
"""
from __future__ import annotations

import time
from pathlib import Path

from orchestrator.cache.backend import Backend, record_key
from orchestrator.cache.backends import open_backend
from orchestrator.cache.blob_upload import upload_blobs
from orchestrator.cache.cache_toml import CacheConfig
from orchestrator.cache.errors import CacheError
from orchestrator.cache.pack_upload import group_small, upload_packs
from orchestrator.cache.signing import SecretKey
from orchestrator.cache.transfer import TransferStats
from orchestrator.hashing import pretty_json
from orchestrator.model.cache_record import CacheRecord, Signature
from orchestrator.store.artifacts import Store


def artifact_record(artifact: Path) -> CacheRecord:
    """The unsigned record of a committed artifact (without packs), or CacheError."""
    manifest = Store.read_manifest(artifact)
    try:
        return CacheRecord.for_manifest(manifest)
    except ValueError as e:
        raise CacheError(f"cannot push {artifact.name}: {e}") from None


def push_artifact(artifact: Path, backend: Backend, key: SecretKey, jobs: int,
                  stats: TransferStats | None = None) -> CacheRecord:
    """Upload one committed artifact; return the record written."""
    stats = stats if stats is not None else TransferStats()
    start = time.monotonic()
    plain = artifact_record(artifact)
    contents = [(sha, f.size, artifact / f.path) for sha, f in plain.blobs().items()]
    groups, loose = group_small(contents)
    label = f"push {plain.name[:12]}"
    packs = upload_packs(backend, groups, jobs, label, stats)
    upload_blobs(backend, loose, jobs, label, stats)
    try:
        record = CacheRecord.for_manifest(plain.manifest, packs)
    except ValueError as e:
        raise CacheError(f"cannot push {artifact.name}: {e}") from None
    record = record.model_copy(update={"signature": Signature(**key.sign(record.payload()))})
    body = pretty_json(record.document()).encode()
    backend.put(record_key(record.id), lambda: [body])
    stats.seconds = time.monotonic() - start
    return record


def push_many(artifacts: list[Path], config: CacheConfig, key: SecretKey, url: str | None = None,
              stats: TransferStats | None = None) -> list[CacheRecord]:
    """Push artifacts to `url` (default: the configured push URL), one after the other."""
    target = url or config.push_url
    if not target:
        raise CacheError("no cache to push to: set push (or substituters) in cache.toml")
    backend = open_backend(target, config)
    try:
        return [push_artifact(a, backend, key, config.jobs, stats) for a in artifacts]
    finally:
        backend.close()
