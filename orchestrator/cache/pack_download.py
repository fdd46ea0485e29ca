"""Downloading packed contents: one request per pack, or per run of the members a pull needs.

A pack (`packs/<sha256>`, model.cache_record.Pack) is the zstd frames of small contents back
to back; the signed record says where each frame lies. Members are split off the stream as
they arrive, decompressed and checked against their sha256 before their file is created in
the staging dir; members the store already has are skipped, and when only some of a pack is
needed, only those byte ranges are asked for (HTTP Range; a server without it sends the
whole pack, which works too). Loose `cas/` blobs and packs share one bounded worker pool.
"""
from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from orchestrator.cache.backend import Backend, pack_key
from orchestrator.cache.blob_download import decode_small, fetch_blob_retrying, write_new
from orchestrator.cache.errors import CacheError, TransferInterrupted
from orchestrator.cache.pack_processes import Workers, shares, worker_count
from orchestrator.cache.transfer import TransferStats, run_parallel
from orchestrator.console import ByteProgress, Meter
from orchestrator.model.cache_record import Pack

RANGE_GAP = 256 << 10   # unneeded bytes between two needed runs: cheaper to read than ask again
MAX_RANGES = 8          # more separate runs than this in one pack: read the whole pack
PACK_ATTEMPTS = 3
WRITE_QUEUE = 16        # batches waiting for the writers (one batch: a chunk's members)
WRITERS = 2             # threads creating members' files (see MemberWriter)
METER_STEP = 4 << 20    # a writer moves the progress bar in steps of this many bytes

# (frame, sha256, size, new file, its mode, where it came from: for messages)
Member = tuple[bytes, str, int, str, int, str]


class MemberWriter:
    """Decompresses, checks and creates the members' files on WRITERS threads, a chunk's
    members (a batch) at a time. The fetchers only move bytes and hand over batches (their
    threads wait on sockets, not on the GIL the writers need between their file system
    calls). Creating a small file is mostly the kernel's work, done with the GIL released:
    two writers overlap it (12k files of torch/: 0.83 s on one thread, 0.55 s on two, on 2
    cores; a third contends on the directories' locks and is slower than one). The first
    failure is kept in `error`; it stops the other writer and the fetchers at their next
    put()."""

    def __init__(self, meter: Meter, writers: int = WRITERS) -> None:
        self.meter = meter
        self.queue: queue.Queue[list[Member] | None] = queue.Queue(WRITE_QUEUE)
        self.error: Exception | None = None
        self.tallies: list[tuple[int, int]] = []  # (files, bytes) of each writer that ended
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(writers)]
        for t in self.threads:
            t.start()

    def _run(self) -> None:
        files = written = unmetered = 0
        while (batch := self.queue.get()) is not None:
            for frame, sha, size, dest, mode, where in batch:
                if self.error is not None:
                    break
                try:
                    write_new(dest, decode_small(frame, sha, size, where), mode)
                except Exception as e:  # noqa: BLE001 - raised by close(); the queue is still drained
                    if self.error is None:
                        self.error = e
                    break
                files += 1
                written += size
                unmetered += size
            if unmetered >= METER_STEP or self.queue.empty():
                self.meter.advance(unmetered)
                unmetered = 0
        self.meter.advance(unmetered)
        self.tallies.append((files, written))  # list.append: one step under the GIL

    def put(self, batch: list[Member], cancel: threading.Event) -> None:
        """Queue members (waits while the queue is full, unless the pull is failing)."""
        while True:
            if self.error is not None:
                raise self.error
            if cancel.is_set():
                raise CacheError("cancelled")
            try:
                self.queue.put(batch, timeout=0.1)
                return
            except queue.Full:
                continue

    def close(self, stats: TransferStats) -> None:
        """Wait until every queued file exists (or the first failure); raise that failure."""
        for _ in self.threads:
            self.queue.put(None)
        for t in self.threads:
            t.join()
        stats.add(blobs_downloaded=sum(f for f, _ in self.tallies),
                  bytes_written=sum(b for _, b in self.tallies))
        if self.error is not None:
            raise self.error


@dataclass
class PackWant:
    """The members of one pack a pull needs: member index -> (content size, new file, the
    mode to create it with)."""
    pack: Pack
    wanted: dict[int, tuple[int, str, int]]

    @property
    def size(self) -> int:
        return sum(size for size, _, _ in self.wanted.values())


def runs(pack: Pack, needed: list[int]) -> list[tuple[int, int]]:
    """(first, last) member spans to ask for, in order: the needed members, joined across
    gaps under RANGE_GAP bytes; the whole pack when that leaves more than MAX_RANGES."""
    spans: list[tuple[int, int]] = []
    members = pack.members
    for i in sorted(needed):
        if spans:
            prev = members[spans[-1][1]]
            if members[i].offset - (prev.offset + prev.length) <= RANGE_GAP:
                spans[-1] = (spans[-1][0], i)
                continue
        spans.append((i, i))
    return [(0, len(members) - 1)] if len(spans) > MAX_RANGES else spans


def _fetch_run(backend: Backend, want: PackWant, first: int, last: int, done: set[int],
               writer: MemberWriter, stats: TransferStats, cancel: threading.Event) -> None:
    """Members first..last of one pack from one request; the needed ones go to the writer."""
    pack, members = want.pack, want.pack.members
    key = pack_key(pack.sha256)
    where = f"{backend.url}{key}"
    start, end = members[first].offset, members[last].offset + members[last].length
    whole = first == 0 and last == len(members) - 1
    content = sum(want.wanted[i][0] for i in range(first, last + 1) if i in want.wanted)
    buf = bytearray()
    pos, i, got = start, first, 0
    with backend.stream(key, content, 0 if whole else start,
                        None if whole else end - start) as chunks:
        for chunk in chunks:
            if cancel.is_set():
                raise CacheError("cancelled")
            buf += chunk
            got += len(chunk)
            if got > end - start:
                raise CacheError(f"refused {where}: longer than the record's {pack.size} bytes "
                                 "(not the pack the record describes)")
            cut, batch = 0, []
            while i <= last and members[i].offset + members[i].length - pos <= len(buf):
                m = members[i]
                lo = m.offset - pos
                if i in want.wanted and i not in done:
                    size, dest, mode = want.wanted[i]
                    batch.append((bytes(buf[lo:lo + m.length]), m.sha256, size, dest, mode,
                                  f"{where} (member {i})"))
                    done.add(i)
                cut, i = lo + m.length, i + 1
            if batch:
                writer.put(batch, cancel)
            if cut:
                del buf[:cut]
                pos += cut
    stats.add(bytes_downloaded=got, packs_downloaded=1)
    if i <= last:  # the stream ended cleanly: the cache's copy itself is short
        raise CacheError(f"refused {where}: truncated pack ({got} of {end - start} bytes "
                         "asked for; the cache holds an incomplete copy: push the artifact "
                         "again)")


def fetch_pack(backend: Backend, want: PackWant, writer: MemberWriter, stats: TransferStats,
               cancel: threading.Event) -> None:
    """Every wanted member of one pack, asking again (for what is still missing, up to
    PACK_ATTEMPTS times) when a transfer is cut short."""
    done: set[int] = set()
    for attempt in range(PACK_ATTEMPTS):
        try:
            for first, last in runs(want.pack, [i for i in want.wanted if i not in done]):
                _fetch_run(backend, want, first, last, done, writer, stats, cancel)
            return
        except TransferInterrupted:
            if attempt + 1 == PACK_ATTEMPTS or cancel.is_set():
                raise
            time.sleep(0.25 * 2 ** attempt)


def _download_here(backend: Backend, loose: list[tuple[str, int, Path]],
                   packs: list[PackWant], jobs: int, meter: Meter,
                   stats: TransferStats) -> None:
    """Loose blobs and packs on this process's threads (see download_contents)."""
    work: list[tuple[int, tuple[str, int, Path] | PackWant]] = [(w[1], w) for w in loose]
    work += [(want.size, want) for want in packs]
    work.sort(key=lambda item: -item[0])
    writer = MemberWriter(meter)

    def one(item: tuple[int, tuple[str, int, Path] | PackWant],
            cancel: threading.Event) -> None:
        what = item[1]
        if isinstance(what, PackWant):
            fetch_pack(backend, what, writer, stats, cancel)
        else:
            fetch_blob_retrying(backend, what[0], what[1], what[2], meter, stats, cancel)
    try:
        run_parallel(min(jobs, max(2, os.cpu_count() or 2)), work, one)
    finally:
        writer.close(stats)  # after a failure: raises the writer's own, else the fetchers'


def _unpack_share(backend: Backend, share: list[PackWant], jobs: int, meter: Meter,
                  stats: TransferStats) -> None:
    _download_here(backend, [], share, jobs, meter, stats)


def download_contents(backend: Backend, loose: list[tuple[str, int, Path]],
                      packs: list[PackWant], jobs: int, label: str,
                      stats: TransferStats) -> None:
    """Loose (sha256, size, dest) blobs and packs, biggest first, at most `jobs` requests at
    a time and no more than the machine has cores (at least 2): each transfer is CPU work
    (zstd, sha256, writes), which beyond the cores only contends. Packs are separate items
    (a pack request's thread only splits the stream; the writers create the files), so the
    small files of an artifact arrive over as many connections as its loose blobs do.

    Many pack members (pack_processes.MIN_MEMBERS and more): the packs go to a worker
    process per core (at most `jobs`), forked before this pull starts a thread; this process
    keeps the loose blobs."""
    workers = worker_count(sum(len(want.wanted) for want in packs), jobs)
    parts = shares(packs, workers) if workers else []
    total = sum(w[1] for w in loose) + sum(want.size for want in packs)
    if not parts:
        with ByteProgress(label, total) as meter:
            _download_here(backend, loose, packs, jobs, meter, stats)
        return
    stats.add(unpack_workers=len(parts))
    with Workers(backend, parts, max(1, jobs // len(parts)), _unpack_share) as forked, \
            ByteProgress(label, total) as meter:
        forked.watch(meter)
        _download_here(backend, loose, [], jobs, meter, stats)
        forked.wait(stats)
