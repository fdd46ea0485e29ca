"""The one failure the cache raises: a server down or refusing, or data it cannot trust."""
from __future__ import annotations

from orchestrator.errors import UserError


class CacheError(UserError):
    """One line naming the cache URL (or key), what went wrong and what to do. Exit 2.

    `doit build` treats it as "this substituter cannot help" and builds locally instead;
    `doit pull` / `doit push` report it and stop.
    """


class TransferInterrupted(CacheError):
    """A blob's stream ended early or the connection broke mid-transfer: worth a retry."""
