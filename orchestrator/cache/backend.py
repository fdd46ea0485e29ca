"""What every cache backend offers, and the cache's key layout (backends.open_backend picks one).

Layout below a cache URL (same for http(s) and file://):
    cas/<sha256>             zstd-compressed file content; the name is the hash of the
                             uncompressed bytes
    packs/<sha256>           small files' contents, one zstd frame each, back to back; the
                             name is the hash of the pack file's bytes; where each content
                             lies is in the records that use it (model.cache_record.Pack)
    ac/<artifact id>.json    the signed record (model.cache_record.CacheRecord)
    checks/<name>-<digest>   write probes (`doit cache check`, the nightly preflight): one per
                             writer, so writers at the same time never read each other's
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Protocol

CHUNK = 256 << 10          # network and file reads; bigger chunks measured slower (allocation)
RECORD_LIMIT = 64 << 20

Body = Callable[[], Iterable[bytes]]   # called once per attempt: a fresh byte stream


def blob_key(sha256: str) -> str:
    return f"cas/{sha256}"


def pack_key(sha256: str) -> str:
    return f"packs/{sha256}"


def record_key(artifact_id: str) -> str:
    return f"ac/{artifact_id}.json"


def probe_key(name: str, *writer: str) -> str:
    """checks/<name>-<16 hex of the writer's identity>: a probe written and read back by one
    writer while another (a teammate's check, a parallel nightly cell) writes its own. The same
    writer reuses its key, so probes do not pile up."""
    return f"checks/{name}-{hashlib.sha256(chr(10).join(writer).encode()).hexdigest()[:16]}"


def window(chunks: Iterable[bytes], skip: int, length: int | None) -> Iterator[bytes]:
    """The bytes of `chunks` after the first `skip`, at most `length` of them."""
    left = -1 if length is None else length
    for chunk in chunks:
        if skip:
            if len(chunk) <= skip:
                skip -= len(chunk)
                continue
            chunk, skip = chunk[skip:], 0
        if left >= 0:
            if len(chunk) >= left:
                if left:
                    yield chunk[:left]
                return
            left -= len(chunk)
        yield chunk


class Backend(Protocol):
    url: str

    def exists(self, key: str) -> bool:
        """Is the object there (HTTP HEAD)?"""

    def get(self, key: str, limit: int = RECORD_LIMIT) -> bytes | None:
        """A small object's bytes, or None when it is absent."""

    def stream(self, key: str, size: int = 0, start: int = 0,
               length: int | None = None) -> AbstractContextManager[Iterator[bytes]]:
        """The object's bytes in chunks; CacheError when absent, unreachable or cut short.
        `size` (the content's size, if known) widens the overall deadline (cache/deadline.py).
        `start`/`length`: only those bytes (an HTTP Range request); never more, fewer when
        the object ends first."""

    def put(self, key: str, body: Body, size: int = 0) -> int:
        """Store an object atomically (readers see all of it or nothing); return bytes sent."""

    def forget_connections(self) -> None:
        """In a forked child (cache/pack_processes.py): drop the pooled connections it
        inherited, unused, so that it opens its own and never shares a socket's stream."""

    def close(self) -> None:
        ...

