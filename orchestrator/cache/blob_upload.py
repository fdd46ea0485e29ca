"""Uploading blobs: HEAD first and skip what the cache has; the content hash is re-checked
while compressing, and a mismatch aborts the PUT mid-body so the server keeps nothing."""
from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from pathlib import Path

import zstandard

from orchestrator.cache.backend import CHUNK, Backend, blob_key
from orchestrator.cache.errors import CacheError
from orchestrator.cache.transfer import TransferStats, run_parallel
from orchestrator.console import ByteProgress

ZSTD_LEVEL = 3


def _compressed(src: Path, sha256: str, meter: ByteProgress,
                cancel: threading.Event) -> Iterator[bytes]:
    h = hashlib.sha256()
    cobj = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compressobj()
    with open(src, "rb") as f:
        while chunk := f.read(CHUNK):
            if cancel.is_set():
                raise CacheError("cancelled")
            h.update(chunk)
            meter.advance(len(chunk))
            out = cobj.compress(chunk)
            if out:
                yield out
    if h.hexdigest() != sha256:
        raise CacheError(f"push aborted: {src} no longer matches its manifest hash "
                         "(the local store was modified)")
    yield cobj.flush()


def upload_blobs(backend: Backend, blobs: list[tuple[str, int, Path]], jobs: int, label: str,
                 stats: TransferStats) -> None:
    """Upload (sha256, size, source) blobs the cache lacks (HEAD first), biggest first."""
    blobs = sorted(blobs, key=lambda b: -b[1])
    with ByteProgress(label, sum(b[1] for b in blobs)) as meter:
        def one(b: tuple[str, int, Path], cancel: threading.Event) -> None:
            sha, size, src = b
            if cancel.is_set():
                return
            if backend.exists(blob_key(sha)):
                meter.advance(size)
                stats.add(blobs_present=1)
                return
            sent = backend.put(blob_key(sha), lambda: _compressed(src, sha, meter, cancel), size)
            stats.add(blobs_uploaded=1, bytes_uploaded=sent)
        run_parallel(jobs, blobs, one)
