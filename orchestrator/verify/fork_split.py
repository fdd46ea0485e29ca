"""Two halves of one computation on two cores: the second half in a forked child.

The child inherits every mapped file and parsed table as they are (nothing is read or sent
twice), answers through a pipe with a small pickle and leaves with os._exit, never running
the parent's cleanup. Whatever goes wrong in it (an exception, a kill, a garbled answer),
the parent computes that half itself: the result never depends on the fork.
"""
from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from typing import TypeVar

A = TypeVar("A")
B = TypeVar("B")


def cores() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def both(mine: Callable[[], A], theirs: Callable[[], B]) -> tuple[A, B]:
    """(mine(), theirs()), theirs() in a forked child while this process runs mine()."""
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return mine(), theirs()
    if pid == 0:  # the child: never returns into the caller's stack
        code = 1
        try:
            os.close(r)
            data = pickle.dumps(theirs(), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(w, "wb") as f:
                f.write(data)
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    try:
        first = mine()
    finally:
        with os.fdopen(r, "rb") as f:
            data = f.read()
        _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 0:
        try:
            return first, pickle.loads(data)
        except Exception:  # noqa: BLE001 - a garbled answer: computed here instead
            pass
    return first, theirs()
