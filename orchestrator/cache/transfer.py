"""What a pull or push moved, and the bounded parallel runner both directions share.

The blobs themselves move in cache/blob_download.py (streaming zstd, sha256 checked on the
fly) and cache/blob_upload.py (HEAD first, hash re-checked while compressing); packs of small
contents in cache/pack_upload.py and cache/pack_download.py.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")


@dataclass
class TransferStats:
    """What a pull or push moved; printed as one line and used by tests and benchmarks."""
    blobs_downloaded: int = 0     # contents received (as loose cas/ blobs or pack members)
    bytes_downloaded: int = 0     # compressed bytes received
    packs_downloaded: int = 0     # requests for packs (or byte ranges of one)
    bytes_written: int = 0        # uncompressed bytes written from downloads
    files_linked: int = 0         # files hard-linked from the local store instead
    bytes_linked: int = 0
    blobs_uploaded: int = 0       # contents sent (as loose blobs or inside packs)
    bytes_uploaded: int = 0       # compressed bytes sent
    blobs_present: int = 0        # contents the cache already had (HEAD of a blob or pack)
    packs_uploaded: int = 0
    packs_present: int = 0
    unpack_workers: int = 0       # processes a pull forked to unpack its packs (0: threads)
    seconds: float = 0.0
    # a pull's phases (benchmarks print them): the record fetched and checked (signature,
    # model), the contents downloaded into the staging dir, the store's commit
    record_seconds: float = 0.0
    download_seconds: float = 0.0
    commit_seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **amounts: int) -> None:
        with self.lock:
            for k, v in amounts.items():
                setattr(self, k, getattr(self, k) + v)

    def as_dict(self) -> dict[str, float]:
        return {k: v for k, v in self.__dict__.items() if k != "lock"}


def run_parallel(jobs: int, work: list[T], fn: Callable[[T, threading.Event], None]) -> None:
    """Run fn(item, cancel) for each item on at most `jobs` threads; first error wins."""
    cancel = threading.Event()
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(work) or 1))) as pool:
        futures = [pool.submit(fn, item, cancel) for item in work]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        errors = [f.exception() for f in done if f.exception() is not None]
        if errors:
            cancel.set()
            for f in futures:
                f.cancel()
            wait(futures)
            raise errors[0]
