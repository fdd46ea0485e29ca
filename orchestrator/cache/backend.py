"""What every cache backend offers, and the cache's key layout (backends.open_backend picks one).

Layout below a cache URL (same for http(s) and file://):
    cas/<sha256>             zstd-compressed file content; the name is the hash of the
                             uncompressed bytes
    ac/<artifact id>.json    the signed record (model.cache_record.CacheRecord)
"""
from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Callable, Iterable, Iterator, Protocol

CHUNK = 256 << 10          # network and file reads; bigger chunks measured slower (allocation)
RECORD_LIMIT = 64 << 20

Body = Callable[[], Iterable[bytes]]   # called once per attempt: a fresh byte stream


def blob_key(sha256: str) -> str:
    return f"cas/{sha256}"


def record_key(artifact_id: str) -> str:
    return f"ac/{artifact_id}.json"


class Backend(Protocol):
    url: str

    def exists(self, key: str) -> bool:
        """Is the object there (HTTP HEAD)?"""

    def get(self, key: str, limit: int = RECORD_LIMIT) -> bytes | None:
        """A small object's bytes, or None when it is absent."""

    def stream(self, key: str, size: int = 0) -> AbstractContextManager[Iterator[bytes]]:
        """The object's bytes in chunks; CacheError when absent, unreachable or cut short.
        `size` (the content's size, if known) widens the overall deadline (cache/deadline.py)."""

    def put(self, key: str, body: Body, size: int = 0) -> int:
        """Store an object atomically (readers see all of it or nothing); return bytes sent."""

    def close(self) -> None:
        ...

