"""The two kinds of failure a user sees: bad input (exit 2) and a failed check (exit 1)."""
from __future__ import annotations


class UserError(Exception):
    """Bad input: one line saying what, where and what to do. Nothing was changed."""


class CheckFailed(Exception):
    """A check (verify, lock drift) failed; `report` is the full human-readable report."""

    def __init__(self, message: str, report: str | None = None) -> None:
        super().__init__(message)
        self.report = report


NO_SPACE_ERRNOS = (28, 122)  # ENOSPC, EDQUOT
NO_SPACE_TEXT = ("No space left on device", "Disk quota exceeded")


def is_no_space(e: BaseException | str) -> bool:
    """An OSError of a full disk (or quota), or a program's message saying so."""
    if isinstance(e, str):
        return any(t in e for t in NO_SPACE_TEXT)
    return isinstance(e, OSError) and e.errno in NO_SPACE_ERRNOS


def no_space(where: object) -> UserError:
    """The one line for a full disk: where, and what to free. What was being written is a
    temp beside its target or a staging directory, removed on the way out: nothing is
    half-written."""
    return UserError(f"no space left on the device holding {where}: free space there (`doit "
                     "gc` drops what no generation uses; `df -h` shows what is full), then run "
                     "the command again; nothing half-written was kept")
