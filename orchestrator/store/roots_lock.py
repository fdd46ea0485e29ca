"""The store's roots lock (<store>/locks/roots.lock, flock(2)): gc holds it exclusively from
working out what to keep until it has deleted; every command that commits an artifact or
links a generation holds it shared, `doit switch` from before its artifact is realised
(found present or committed) until its generation is linked. So a just-committed or
just-found artifact is never deleted before the generation that roots it exists."""
from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from orchestrator import fault_point
from orchestrator.model.store_layout import StorePaths

ROOTS_LOCK = "roots.lock"


@contextlib.contextmanager
def holding(store_root: Path, exclusive: bool = False) -> Iterator[None]:
    """Shared (commit, link) or exclusive (gc). Shared holders never wait for each other; a
    second shared hold in the same process (switch → commit) is another descriptor."""
    locks = StorePaths(store_root).locks
    locks.mkdir(parents=True, exist_ok=True)
    fd = os.open(locks / ROOTS_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if not exclusive:
            fcntl.flock(fd, fcntl.LOCK_SH)
        else:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                from orchestrator.console import console  # (not imported by a memo's answer)

                console.print("gc: waiting for a switch or commit in progress to finish")
                fault_point.mark("gc-waits-for-roots")
                fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock
