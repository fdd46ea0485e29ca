"""Overall deadlines for network operations (the per-read socket timeout is not one).

A server that drips one byte a second never trips a socket timeout; a `Deadline` bounds
the whole operation: when it passes, it shuts down the sockets of the connections the
operation used (from a timer thread), which unblocks any read, and the operation ends in
one CacheError saying so. Connections join the deadline active on the calling thread when
they send a request (see http.py's connection class).
"""
from __future__ import annotations

import socket
import threading
from types import TracebackType
from typing import Any

from orchestrator.cache.errors import CacheError

# A blob's deadline grows with its size at this slowest acceptable rate (bytes/s).
MIN_RATE = 1 << 20

_active = threading.local()


def blob_deadline(timeout: float, size: int) -> float:
    """Seconds allowed for one object of `size` bytes, given cache.toml's `timeout`."""
    return timeout + size / MIN_RATE


class Deadline:
    """`with Deadline(seconds, what):` bounds everything inside on this thread."""

    def __init__(self, seconds: float, what: str) -> None:
        self.seconds = seconds
        self.what = what
        self.expired = threading.Event()
        self._lock = threading.Lock()
        self._conns: list[Any] = []
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._prev: Deadline | None = None

    def __enter__(self) -> Deadline:
        self._prev = getattr(_active, "deadline", None)
        _active.deadline = self
        self._timer.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._timer.cancel()
        _active.deadline = self._prev
        if self.expired.is_set() and (exc_type is None or issubclass(exc_type, Exception)):
            raise self.error() from None

    def error(self) -> CacheError:
        return CacheError(f"{self.what}: gave up after {self.seconds:.0f}s, the overall deadline "
                          "(timeout in cache.toml); the server is too slow or stalled")

    def attach(self, conn: Any) -> None:
        """Shut `conn` down when the deadline passes (at once if it already has)."""
        with self._lock:
            if self.expired.is_set():
                raise self.error()
            self._conns.append(conn)

    def _fire(self) -> None:
        with self._lock:
            self.expired.set()
            conns = list(self._conns)
        for conn in conns:
            sock = getattr(conn, "sock", None)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def attach_current(conn: Any) -> None:
    """Called by a connection about to send a request: join this thread's deadline."""
    deadline: Deadline | None = getattr(_active, "deadline", None)
    if deadline is not None:
        deadline.attach(conn)
