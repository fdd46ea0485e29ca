"""The one failure the cache raises: a server down or refusing, or data it cannot trust."""
from __future__ import annotations

import re

from orchestrator.errors import UserError

# C0 controls, DEL and C1 controls: a record or a server could forge terminal output with them.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
MAX_MESSAGE = 1000


def printable(text: str, limit: int = MAX_MESSAGE) -> str:
    """Remote text made safe for one terminal line: controls as \\xNN, long text cut."""
    out = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return out if len(out) <= limit else out[:limit] + "…"


class CacheError(UserError):
    """One line naming the cache URL (or key), what went wrong and what to do. Exit 2.

    `doit build` treats it as "this substituter cannot help" and builds locally instead;
    `doit pull` / `doit push` report it and stop. The message is made printable here, so
    text from a record or a server never reaches the terminal raw.
    """

    def __init__(self, message: str) -> None:
        super().__init__(printable(message))


class TransferInterrupted(CacheError):
    """A blob's stream ended early or the connection broke mid-transfer: worth a retry."""
