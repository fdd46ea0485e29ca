"""Packs unpacked by forked worker processes, one per core, for pulls of many small files.

A pull of 12k small files is bound by one interpreter's per-file work (zstd, sha256, the
file's creation: ~70 us each), not by the network or the disk; threads in one process only
pass the GIL around (issue 36, docs/cache.md). Each worker is a fork of the pulling process
that runs the same threaded pipeline (pack_download.fetch_pack and MemberWriter) on its share
of the packs, into the same staging dir, and reports through a pipe: progress lines
(`p <bytes>`) and one result line (`r <json>`: its stats, or its first error). The parent
keeps the loose blobs and the progress bar.

Forking before any of this pull's threads start, the workers only use what they were handed:
the backend, after `forget_connections()` (the parent's pooled sockets are never shared),
hashlib, zstandard and the file system. A worker dies with its parent (PR_SET_PDEATHSIG), so
a killed pull leaves no writer behind in a staging dir the next run removes; on the first
failure the parent kills the other workers and raises that failure as a CacheError.
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any, NoReturn

from orchestrator.cache.backend import Backend
from orchestrator.cache.errors import CacheError
from orchestrator.cache.transfer import TransferStats
from orchestrator.console import Meter

MIN_MEMBERS = 1024   # fewer members to create: threads in this process (a fork costs ~ms)
PR_SET_PDEATHSIG = 1
STATS = ("blobs_downloaded", "bytes_downloaded", "packs_downloaded", "bytes_written")


def worker_count(members: int, jobs: int) -> int:
    """How many worker processes unpack `members` files: 0 (stay in this process) for a few,
    else one per core, no more than the cache's `jobs` (its transfers at a time), at least 2."""
    if members < MIN_MEMBERS or not hasattr(os, "fork"):
        return 0
    return max(2, min(os.cpu_count() or 2, jobs))


def shares(packs: list[Any], count: int) -> list[list[Any]]:
    """`packs` split into `count` shares of about equal member counts (the cost is per file),
    each in its original order; empty shares are dropped."""
    out: list[list[tuple[int, Any]]] = [[] for _ in range(count)]
    load = [0] * count
    for n, want in sorted(enumerate(packs), key=lambda p: -len(p[1].wanted)):
        k = load.index(min(load))
        out[k].append((n, want))
        load[k] += len(want.wanted)
    return [[w for _, w in sorted(share, key=lambda p: p[0])] for share in out if share]


class PipeMeter:
    """A worker's progress: each advance() is one line to the parent (MemberWriter already
    advances in steps of megabytes)."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.lock = threading.Lock()

    def advance(self, amount: int) -> None:
        if amount:
            with self.lock:
                self.out.write(f"p {amount}\n")
                self.out.flush()


def _die_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: a killed parent's workers end when their transfers do


Unpack = Callable[[Backend, list[Any], int, Meter, TransferStats], None]


def _worker(backend: Backend, share: list[Any], jobs: int, out_fd: int,
            unpack: Unpack) -> NoReturn:
    """The child's whole life: unpack its share, report, `os._exit` (never returns, never runs
    the parent's cleanups or flushes its buffers)."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _die_with_parent()
        out = os.fdopen(out_fd, "w")
        stats = TransferStats()
        result: dict[str, Any]
        try:
            backend.forget_connections()
            unpack(backend, share, jobs, PipeMeter(out), stats)
            result = {"stats": {k: getattr(stats, k) for k in STATS}}
        except CacheError as e:
            result = {"error": str(e)}
        except OSError as e:
            result = {"error": f"cannot write to the store: {e.strerror or e}"
                               + (f" ({e.filename})" if e.filename else "")}
        except Exception as e:  # noqa: BLE001 - reported to the parent, which raises it
            result = {"error": f"unpacking worker failed: {type(e).__name__}: {e}"}
        out.write("r " + json.dumps(result) + "\n")
        out.flush()
        code = 0
    finally:
        os._exit(code)


@dataclass
class _Child:
    pid: int
    pipe: IO[str]
    result: dict[str, Any] | None = None
    status: int | None = None
    reader: threading.Thread | None = field(default=None, repr=False)


class Workers:
    """`with Workers(backend, shares, jobs, unpack) as w: w.watch(meter); ...; w.wait(stats)`.

    Forks one worker per share on entry (before the caller starts its progress bar's or its
    transfers' threads); `watch` passes their progress on; `wait` collects their results (the first error
    raised as a CacheError); leaving the block early (an error or an interrupt in the
    parent) kills and reaps every worker still running."""

    def __init__(self, backend: Backend, parts: list[list[Any]], jobs: int,
                 unpack: Unpack) -> None:
        self.backend, self.parts, self.jobs, self.unpack = backend, parts, jobs, unpack
        self.meter: Meter | None = None
        self.children: list[_Child] = []
        self.failed = threading.Event()
        self.reaping = threading.Lock()  # a pid is never signalled once reaped (reuse)

    def __enter__(self) -> Workers:
        try:
            for share in self.parts:
                r, w = os.pipe()
                pid = os.fork()
                if pid == 0:  # pragma: no cover - the child's coverage is not collected
                    os.close(r)
                    _worker(self.backend, share, self.jobs, w, self.unpack)
                os.close(w)
                self.children.append(_Child(pid, os.fdopen(r, "r")))
        except BaseException:
            self._stop()
            raise
        return self

    def watch(self, meter: Meter) -> None:
        """Start reading the workers' pipes: progress into `meter`, results kept."""
        self.meter = meter
        for child in self.children:
            child.reader = threading.Thread(target=self._read, args=(child,), daemon=True)
            child.reader.start()

    def _read(self, child: _Child) -> None:
        try:
            for line in child.pipe:
                kind, _, rest = line.rstrip("\n").partition(" ")
                if kind == "p" and self.meter is not None:
                    self.meter.advance(int(rest))
                elif kind == "r":
                    result = json.loads(rest)
                    if not isinstance(result, dict) or not ("error" in result or "stats" in result):
                        raise ValueError(rest[:80])
                    child.result = result
                    if "error" in result:
                        self.failed.set()
        except ValueError as e:  # a report this module did not write: the worker is broken
            child.result = {"error": f"an unpacking worker of this pull sent a broken report ({e})"}
            self.failed.set()
            os.kill(child.pid, signal.SIGKILL)
        finally:
            child.pipe.close()
            with self.reaping:  # EOF: the worker has exited (or is about to): a short wait
                child.status = os.waitpid(child.pid, 0)[1]
            if child.result is None:
                self.failed.set()

    def wait(self, stats: TransferStats) -> None:
        """Every worker's files exist, their counts are in `stats`; else the first failure."""
        while not self.failed.is_set() and any(c.reader and c.reader.is_alive()
                                               for c in self.children):
            self.failed.wait(0.05)
        if self.failed.is_set():
            self._stop()
            raise CacheError(self._first_error())
        for child in self.children:
            assert child.result is not None
            stats.add(**child.result["stats"])

    def _first_error(self) -> str:
        for child in self.children:
            if child.result is not None and "error" in child.result:
                return str(child.result["error"])
        for child in self.children:
            if child.result is None and child.status is not None:
                how = (f"signal {os.WTERMSIG(child.status)}" if os.WIFSIGNALED(child.status)
                       else f"exit status {os.WEXITSTATUS(child.status)}")
                return f"an unpacking worker of this pull died ({how}) before it finished"
        return "an unpacking worker of this pull failed"

    def _stop(self) -> None:
        with self.reaping:
            for child in self.children:
                if child.status is None:
                    try:
                        os.kill(child.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        for child in self.children:
            if child.reader is not None:
                child.reader.join()
            elif child.status is None:  # never watched: reap it here
                child.pipe.close()
                child.status = os.waitpid(child.pid, 0)[1]

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        if exc_type is not None:
            self._stop()
