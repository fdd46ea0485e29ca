"""Moving blobs: bounded parallel, streaming zstd, sha256 checked on the fly, rich progress.

Downloads decompress and hash while streaming and write straight into a staging file; a
wrong hash, a wrong size or a cut-short stream is refused before the file is ever used.
Uploads ask HEAD first and skip blobs the cache has; the content hash is re-checked while
compressing, and a mismatch aborts the PUT mid-body so the server keeps nothing.
"""
from __future__ import annotations

import hashlib
import os
import queue
import sys
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import zstandard
from rich.console import Console
from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn,
                           TimeRemainingColumn, TransferSpeedColumn)

from orchestrator.cache.backend import CHUNK, Backend, blob_key
from orchestrator.cache.errors import CacheError, TransferInterrupted

ZSTD_LEVEL = 3
T = TypeVar("T")
BLOB_ATTEMPTS = 3
PREFETCH_QUEUE = 64     # compressed chunks (CHUNK each) read ahead per blob
SMALL_BLOB = 1 << 20    # up to this size a blob is fetched without helper threads
WRITE_BUFFER = 1 << 20  # decompressed bytes per buffer (measured best: fits the cache)
WRITE_BUFFERS = 6      # buffers per blob, circulating between decompressing and writing


@dataclass
class TransferStats:
    """What a pull or push moved; printed as one line and used by tests and benchmarks."""
    blobs_downloaded: int = 0
    bytes_downloaded: int = 0     # compressed bytes received
    bytes_written: int = 0        # uncompressed bytes written from downloads
    files_linked: int = 0         # files hard-linked from the local store instead
    bytes_linked: int = 0
    blobs_uploaded: int = 0
    bytes_uploaded: int = 0       # compressed bytes sent
    blobs_present: int = 0        # blobs the cache already had (HEAD)
    seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **amounts: int) -> None:
        with self.lock:
            for k, v in amounts.items():
                setattr(self, k, getattr(self, k) + v)

    def as_dict(self) -> dict[str, float]:
        return {k: v for k, v in self.__dict__.items() if k != "lock"}


def progress_enabled() -> bool:
    return sys.stderr.isatty() and not os.environ.get("ORCH_NO_PROGRESS")


class Meter:
    """A rich progress bar in bytes with bytes/s; silent when stderr is not a terminal."""

    def __init__(self, label: str, total: int) -> None:
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                                 TransferSpeedColumn(), TimeRemainingColumn(),
                                 console=Console(stderr=True), transient=True,
                                 disable=not progress_enabled())
        self.task = self.progress.add_task(label, total=total)

    def __enter__(self) -> "Meter":
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def advance(self, n: int) -> None:
        self.progress.advance(self.task, n)


def _run_parallel(jobs: int, work: list[T], fn: Callable[[T, threading.Event], None]) -> None:
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


class _Writer:
    """Hashes and writes decompressed data on its own thread while the caller decompresses
    into the next buffer. A few 1 MiB buffers circulate (free → filled → written → free):
    no allocation per chunk, and each buffer stays in the CPU cache between the stages."""

    def __init__(self, fd: int, meter: Meter, size: int) -> None:
        self.fd = fd
        self.meter = meter
        self.hash = hashlib.sha256()
        self.free: queue.Queue[bytearray] = queue.Queue()
        self.buffer_size = max(1, min(WRITE_BUFFER, size + 1))  # +1: room to see excess data
        self.created = 0
        self.filled: queue.Queue[tuple[bytearray, int] | None] = queue.Queue()
        self.error: OSError | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (item := self.filled.get()) is not None:
            buf, n = item
            if self.error is None:
                try:
                    view = memoryview(buf)[:n]
                    self.hash.update(view)
                    while view:
                        view = view[os.write(self.fd, view):]
                    self.meter.advance(n)
                except OSError as e:
                    self.error = e
            self.free.put(buf)

    def buffer(self) -> bytearray:
        """An empty buffer to decompress into (waits while all are being written)."""
        if self.error is not None:
            raise CacheError(f"cannot write to the store: {self.error.strerror}")
        if self.free.empty() and self.created < WRITE_BUFFERS:
            self.created += 1
            return bytearray(self.buffer_size)
        return self.free.get()

    def put(self, buf: bytearray, n: int) -> None:
        self.filled.put((buf, n))

    def close(self) -> None:
        """Wait until everything queued is written (never raises; see .error)."""
        self.filled.put(None)
        self.thread.join()


class _Prefetch:
    """Reads a blob's stream on its own thread, so the socket is drained (and the server keeps
    sending) while this thread decompresses; bounded queue of compressed chunks."""

    _END = object()

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.queue: queue.Queue[object] = queue.Queue(maxsize=PREFETCH_QUEUE)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(chunks,), daemon=True)
        self.thread.start()

    def _put(self, item: object) -> bool:
        while not self.stop.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, chunks: Iterator[bytes]) -> None:
        try:
            for chunk in chunks:
                if not self._put(chunk):
                    return
            self._put(self._END)
        except BaseException as e:  # noqa: BLE001 - re-raised in the consuming thread
            self._put(e)

    def __iter__(self) -> Iterator[bytes]:
        while (item := self.queue.get()) is not self._END:
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]

    def close(self) -> None:
        """Stop reading (the stream's owner closes the connection, which ends a blocked read)."""
        self.stop.set()


def max_wire(size: int) -> int:
    """More compressed bytes than this for `size` bytes of content means a hostile server
    (zstd's worst case is about size + size/256 + a few hundred bytes)."""
    return size + size // 128 + 4096


class _Source:
    """A file-like read() over the prefetched chunks for zstandard's stream_reader; counts the
    compressed bytes, bounds them, and remembers whether the stream ended."""

    def __init__(self, chunks: Iterator[bytes], limit: int, where: str) -> None:
        self.chunks = iter(chunks)
        self.pending = memoryview(b"")
        self.wire = 0
        self.limit = limit
        self.where = where
        self.ended = False

    def read(self, n: int = -1) -> bytes | memoryview:
        if not self.pending:
            nxt = next(self.chunks, None)
            if nxt is None:
                self.ended = True
                return b""
            self.wire += len(nxt)
            if self.wire > self.limit:
                raise CacheError(f"refused {self.where}: far more compressed data than its "
                                 "content needs")
            self.pending = memoryview(nxt)
        size = len(self.pending) if n < 0 else n
        out, self.pending = self.pending[:size], self.pending[size:]
        return out


def truncated(where: str, got: int, size: int) -> str:
    return (f"refused {where}: truncated blob ({got} of {size} bytes decompressed; the cache "
            "holds an incomplete copy: push the artifact again)")


def _fetch_small(backend: Backend, sha256: str, size: int, dest: Path, meter: Meter,
                 stats: TransferStats) -> None:
    """A small blob in one go on the calling thread (threads would cost more than they save)."""
    key = blob_key(sha256)
    where = f"{backend.url}{key}"
    raw = bytearray()
    with backend.stream(key, size) as chunks:
        for chunk in chunks:
            raw += chunk
            if len(raw) > max_wire(size):
                raise CacheError(f"refused {where}: far more compressed data than its content "
                                 "needs")
    reader = zstandard.ZstdDecompressor().stream_reader(bytes(raw), read_across_frames=True)
    data = bytearray()
    try:
        while len(data) <= size:  # bounded: a tiny "bomb" blob never inflates past size + 1
            piece = reader.read(size + 1 - len(data))
            if not piece:
                break
            data += piece
    except zstandard.ZstdError as e:
        raise CacheError(f"refused {where}: not valid zstd data ({e})") from None
    if len(data) > size:
        raise CacheError(f"refused {where}: more data than the record's {size} bytes")
    if len(data) != size:  # the stream ended cleanly: the cache's copy itself is short
        raise CacheError(truncated(where, len(data), size))
    if hashlib.sha256(data).hexdigest() != sha256:
        raise CacheError(f"refused {where}: content hash mismatch (tampered or corrupted blob)")
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError as e:
        raise CacheError(f"cannot write to the store: {e.strerror} ({dest})") from None
    finally:
        os.close(fd)
    meter.advance(size)
    stats.add(blobs_downloaded=1, bytes_downloaded=len(raw), bytes_written=size)


def fetch_blob(backend: Backend, sha256: str, size: int, dest: Path, meter: Meter,
               stats: TransferStats, cancel: threading.Event) -> None:
    """Download one blob into a new file `dest`, refusing wrong content or a short stream.

    Three threads per large blob: read (keeps the socket drained), decompress (here),
    hash + write. Small blobs are done in one go.
    """
    if size <= SMALL_BLOB:
        return _fetch_small(backend, sha256, size, dest, meter, stats)
    key = blob_key(sha256)
    where = f"{backend.url}{key}"
    written = 0
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    writer = _Writer(fd, meter, size)
    try:
        with backend.stream(key, size) as stream:
            chunks = _Prefetch(stream)
            source = _Source(chunks, max_wire(size), where)
            try:
                reader = zstandard.ZstdDecompressor().stream_reader(
                    source, read_size=CHUNK, read_across_frames=True)
                while True:
                    if cancel.is_set():
                        raise CacheError("cancelled")
                    buf = writer.buffer()
                    try:
                        n = reader.readinto(buf)
                    except zstandard.ZstdError as e:
                        writer.free.put(buf)
                        if source.ended:
                            break  # the stream stopped inside a frame: reported below
                        raise CacheError(f"refused {where}: not valid zstd data ({e})") from None
                    if not n:
                        writer.free.put(buf)
                        break
                    written += n
                    if written > size:
                        writer.free.put(buf)
                        raise CacheError(f"refused {where}: more data than the record's "
                                         f"{size} bytes")
                    writer.put(buf, n)
            finally:
                chunks.close()
    finally:
        writer.close()
        os.close(fd)
    if writer.error is not None:
        raise CacheError(f"cannot write to the store: {writer.error.strerror} ({dest})")
    if written != size:
        if source.ended:  # the stream ended cleanly: the cache's copy itself is short
            raise CacheError(truncated(where, written, size))
        raise TransferInterrupted(f"refused {where}: transfer cut short ({written} of {size} "
                                  "bytes)")
    if writer.hash.hexdigest() != sha256:
        raise CacheError(f"refused {where}: content hash mismatch (tampered or corrupted blob)")
    stats.add(blobs_downloaded=1, bytes_downloaded=source.wire, bytes_written=written)


def fetch_blob_retrying(backend: Backend, sha256: str, size: int, dest: Path, meter: Meter,
                        stats: TransferStats, cancel: threading.Event) -> None:
    """fetch_blob, again from the start (up to BLOB_ATTEMPTS) when the stream was cut."""
    for attempt in range(BLOB_ATTEMPTS):
        try:
            return fetch_blob(backend, sha256, size, dest, meter, stats, cancel)
        except TransferInterrupted:
            dest.unlink(missing_ok=True)
            if attempt + 1 == BLOB_ATTEMPTS or cancel.is_set():
                raise
            time.sleep(0.25 * 2 ** attempt)


def download_blobs(backend: Backend, wanted: list[tuple[str, int, Path]], jobs: int,
                   label: str, stats: TransferStats) -> None:
    """Fetch (sha256, size, dest) blobs, biggest first, at most `jobs` at a time."""
    wanted = sorted(wanted, key=lambda w: -w[1])
    with Meter(label, sum(w[1] for w in wanted)) as meter:
        _run_parallel(jobs, wanted, lambda w, cancel: fetch_blob_retrying(
            backend, w[0], w[1], w[2], meter, stats, cancel))


def _compressed(src: Path, sha256: str, meter: Meter, cancel: threading.Event) -> Iterator[bytes]:
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
    with Meter(label, sum(b[1] for b in blobs)) as meter:
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
        _run_parallel(jobs, blobs, one)
