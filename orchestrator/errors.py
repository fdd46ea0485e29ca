"""The two kinds of failure a user sees: bad input (exit 2) and a failed check (exit 1)."""
from __future__ import annotations


class UserError(Exception):
    """Bad input: one line saying what, where and what to do. Nothing was changed."""


class CheckFailed(Exception):
    """A check (verify, lock drift) failed; `report` is the full human-readable report."""

    def __init__(self, message: str, report: str | None = None) -> None:
        super().__init__(message)
        self.report = report
