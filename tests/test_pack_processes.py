"""cache.pack_processes.Workers with real forks and pipes, the unpacking replaced by small
functions: progress and stats reach the parent; a worker's error, a worker that dies without
its result, or one that sends a line the protocol does not have, is one CacheError in the
parent and no worker is left running. (The real unpacking through it: test_cache_packs.py.)"""
from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from orchestrator.cache.errors import CacheError
from orchestrator.cache.file import FileBackend
from orchestrator.cache.pack_processes import PipeMeter, Workers, shares
from orchestrator.cache.transfer import TransferStats


class Tally:
    def __init__(self) -> None:
        self.total = 0
        self.lock = threading.Lock()

    def advance(self, amount: int) -> None:
        with self.lock:
            self.total += amount


def backend(tmp_path: Any) -> FileBackend:
    return FileBackend(f"file://{tmp_path}/")


def run(tmp_path: Any, unpack: Any, parts: int = 2) -> tuple[TransferStats, Tally, list[int]]:
    stats, tally = TransferStats(), Tally()
    with Workers(backend(tmp_path), [[n] for n in range(parts)], 1, unpack) as w:
        pids = [c.pid for c in w.children]
        w.watch(tally)
        w.wait(stats)
    return stats, tally, pids


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_progress_and_stats_reach_the_parent(tmp_path) -> None:
    def unpack(backend, share, jobs, meter, stats) -> None:  # noqa: ANN001
        meter.advance(5)
        meter.advance(7)
        stats.add(blobs_downloaded=10 + share[0], bytes_written=100)
    stats, tally, pids = run(tmp_path, unpack)
    assert tally.total == 24 and stats.blobs_downloaded == 21 and stats.bytes_written == 200
    assert all(gone(p) for p in pids)


@pytest.mark.parametrize("case", ["error", "died", "garbled"])
def test_a_failing_worker_is_one_error_and_none_is_left(tmp_path, case: str) -> None:
    def unpack(backend, share, jobs, meter: PipeMeter, stats) -> None:  # noqa: ANN001
        if share[0] == 1:
            threading.Event().wait(60)  # the other worker: must be stopped, not waited for
        if case == "error":
            raise CacheError("refused x: content hash mismatch")
        if case == "died":
            os._exit(3)
        meter.out.write("r [1, 2]\n")
        meter.out.flush()
    with pytest.raises(CacheError) as err:
        run(tmp_path, unpack)
    expected = {"error": "refused x: content hash mismatch",
                "died": "an unpacking worker of this pull died (exit status 3) before it finished",
                "garbled": "an unpacking worker of this pull sent a broken report ([1, 2])"}[case]
    assert str(err.value) == expected


def test_an_interrupt_in_the_parent_stops_the_workers(tmp_path) -> None:
    def unpack(backend, share, jobs, meter, stats) -> None:  # noqa: ANN001
        threading.Event().wait(60)
    with pytest.raises(KeyboardInterrupt):
        with Workers(backend(tmp_path), [[0], [1]], 1, unpack) as w:
            pids = [c.pid for c in w.children]
            raise KeyboardInterrupt
    assert all(c.status is not None for c in w.children) and all(gone(p) for p in pids)


def test_shares_balance_members_and_keep_order() -> None:
    class Want:
        def __init__(self, n: int) -> None:
            self.wanted = dict.fromkeys(range(n))
    packs = [Want(n) for n in (50, 10, 40, 30, 20, 5)]
    parts = shares(packs, 2)
    assert sorted(sum(len(w.wanted) for w in p) for p in parts) == [75, 80]
    assert all([packs.index(w) for w in p] == sorted(packs.index(w) for w in p) for p in parts)
    assert shares(packs[:1], 3) == [[packs[0]]]
