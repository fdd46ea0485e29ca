"""Uploading small contents as packs (`packs/<sha256>`): far fewer requests than a blob each.

Which contents share a pack is content-defined, so that pushes of similar artifacts make
the same packs and HEAD finds them: contents go in record order (the manifest's path order),
and a pack ends after a content whose hash falls below size/PACK_TARGET of the hash space,
on average every PACK_TARGET bytes; a changed file changes its own pack (and at most a
neighbour), never the rest. Each member is its own zstd frame (declaring its size), so a
puller can fetch some members by byte range. The packed contents are not also pushed as
`cas/` blobs (that would double the upload); older records keep using the blobs they name.
"""
from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import zstandard

from orchestrator.cache.backend import Backend, pack_key
from orchestrator.cache.blob_upload import ZSTD_LEVEL
from orchestrator.cache.errors import CacheError
from orchestrator.cache.transfer import TransferStats, run_parallel
from orchestrator.console import ByteProgress
from orchestrator.model.cache_record import MAX_PACKED_FILE, Pack, PackMember

# Contents up to this size are packed, bigger ones are cas/ blobs. A registry spends CPU per
# blob it serves (docker-registry: ~3.5 ms, a 4 MiB read buffer per GET), so the blob count
# bounds a pull of many files: 1 MiB (the most a record may pack) and 4 MiB packs took the
# 12k-file set from 183 blobs to 60, and its registry pull from 1.5 s to 0.9 s (docs/cache.md).
PACK_FILE_MAX = MAX_PACKED_FILE
PACK_TARGET = 4 << 20       # content bytes per pack, on average
PACK_LIMIT = 8 << 20        # a pack is closed before its content would pass this
assert PACK_FILE_MAX <= MAX_PACKED_FILE

Content = tuple[str, int, Path]   # (sha256, size, file holding it)


def ends_pack(sha256: str, size: int) -> bool:
    """Does a pack end after this content? True for about size/PACK_TARGET of all hashes."""
    return int(sha256[:15], 16) * PACK_TARGET < (size + 1) << 60


def group_small(contents: list[Content]) -> tuple[list[list[Content]], list[Content]]:
    """(packs of small contents, in order; the contents left loose)."""
    groups: list[list[Content]] = []
    loose: list[Content] = []
    current: list[Content] = []
    held = 0
    for c in contents:
        if c[1] > PACK_FILE_MAX:
            loose.append(c)
            continue
        if current and held + c[1] > PACK_LIMIT:
            groups.append(current)
            current, held = [], 0
        current.append(c)
        held += c[1]
        if ends_pack(c[0], c[1]):
            groups.append(current)
            current, held = [], 0
    if current:
        groups.append(current)
    return groups, loose


class _Compressor(threading.local):
    """One compression context per thread (contexts are not thread-safe, and cost to make)."""

    def get(self) -> zstandard.ZstdCompressor:
        if not hasattr(self, "cctx"):
            self.cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
        return self.cctx


_COMPRESSOR = _Compressor()


def build_pack(group: list[Content], meter: ByteProgress,
               cancel: threading.Event) -> tuple[bytes, list[PackMember]]:
    """The pack file's bytes and where each member lies; each file re-hashed on the way."""
    frames: list[bytes] = []
    members: list[PackMember] = []
    offset = 0
    cctx = _COMPRESSOR.get()
    for sha, size, src in group:
        if cancel.is_set():
            raise CacheError("cancelled")
        data = src.read_bytes()
        if len(data) != size or hashlib.sha256(data).hexdigest() != sha:
            raise CacheError(f"push aborted: {src} no longer matches its manifest hash "
                             "(the local store was modified)")
        frame = cctx.compress(data)
        frames.append(frame)
        members.append(PackMember(sha256=sha, offset=offset, length=len(frame)))
        offset += len(frame)
        meter.advance(size)
    return b"".join(frames), members


def upload_packs(backend: Backend, groups: list[list[Content]], jobs: int, label: str,
                 stats: TransferStats) -> list[Pack]:
    """Build each group's pack and upload those the cache lacks (HEAD first); the packs in
    the groups' order, for the record."""
    made: list[Pack | None] = [None] * len(groups)
    with ByteProgress(label, sum(c[1] for g in groups for c in g)) as meter:
        def one(item: tuple[int, list[Content]], cancel: threading.Event) -> None:
            n, group = item
            data, members = build_pack(group, meter, cancel)
            sha = hashlib.sha256(data).hexdigest()
            if backend.exists(pack_key(sha)):
                stats.add(packs_present=1, blobs_present=len(members))
            else:
                sent = backend.put(pack_key(sha), lambda: [data], sum(c[1] for c in group))
                stats.add(packs_uploaded=1, blobs_uploaded=len(members), bytes_uploaded=sent)
            made[n] = Pack(sha256=sha, size=len(data), members=members)
        run_parallel(jobs, list(enumerate(groups)), one)
    return [p for p in made if p is not None]
