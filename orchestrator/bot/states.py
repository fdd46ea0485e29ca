"""What a cell's result means to a reader and to the exit code: its display state, whether it
fails the night under `fail_on`, the night's own wall time, and sizes for people.

States (the grid's marks): ok ✓, abi ⚠ (built, but an ABI regression against its previous
good night), failed ✗ (source, build, verify, smoke, bench or cell), push ⇡ (built and
tested, the push failed), skipped –, nogpu ∅ (a GPU cell that has never run on a GPU),
missing ? (no result).
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

MARKS = {"ok": "✓", "abi": "⚠", "failed": "✗", "push": "⇡", "skipped": "–", "nogpu": "∅",
         "missing": "?"}
WORDS = {"ok": "ok", "abi": "ABI regression", "failed": "failed", "push": "push failed",
         "skipped": "skipped", "nogpu": "never ran on a GPU", "missing": "missing"}


def abi_regressions(c: dict[str, Any]) -> list[str]:
    return list((c.get("abi_diff") or {}).get("regressions") or [])


def fail_class(c: dict[str, Any]) -> str | None:
    """Why this cell could fail the night: its failing stage, "abi", "missing", or None."""
    if c["status"] == "failed":
        return str(c.get("stage") or "cell")
    if c["status"] == "missing":
        return "missing"
    if abi_regressions(c):
        return "abi"
    return None


def fails_night(c: dict[str, Any], fail_on: Iterable[str]) -> bool:
    why = fail_class(c)
    return why is not None and (why == "missing" or why in fail_on)


def cell_state(c: dict[str, Any]) -> str:
    if c["status"] == "failed":
        return "push" if c.get("stage") == "push" else "failed"
    if c["status"] == "missing":
        return "missing"
    if abi_regressions(c):
        return "abi"
    if c["status"] == "skipped":
        return "nogpu" if c.get("never_on_gpu") else "skipped"
    return "ok"


def mark_gpu_history(history: list[dict[str, Any]], run: str, results: list[dict[str, Any]]) -> None:
    """A skipped GPU cell gets `last_on_gpu` (the latest night it ran on a GPU) or
    `never_on_gpu: true`."""
    for c in results:
        if not (c.get("requires_gpu") and c["status"] == "skipped"):
            continue
        last = next((h["run"] for h in reversed(history) if h["run"] != run
                     for x in h["cells"] if x.get("cell") == c["cell"] and x.get("gpu")), None)
        if last is None:
            c["never_on_gpu"] = True
        else:
            c["last_on_gpu"] = last


def _when(iso: str) -> dt.datetime:
    return dt.datetime.fromisoformat(iso)


def night_times(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The night's own span: first cell start to last cell end (not any artifact's build time)."""
    spans = [(_when(c["started"]), _when(c["started"]) + dt.timedelta(seconds=c.get("seconds") or 0))
             for c in results if c.get("started")]
    if not spans:
        return {"started": None, "finished": None, "wall_seconds": None}
    start, end = min(s for s, _ in spans), max(e for _, e in spans)
    return {"started": start.isoformat(timespec="seconds"), "finished": end.isoformat(timespec="seconds"),
            "wall_seconds": round((end - start).total_seconds(), 1)}


def human_size(n: int | float | None) -> str:
    if n is None or n == "":
        return ""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def human_seconds(s: float | None) -> str:
    if s is None:
        return ""
    s = float(s)
    if s < 60:
        return f"{s:.1f} s"
    m, sec = divmod(round(s), 60)
    return f"{m} min {sec:02d} s" if m < 60 else f"{m // 60} h {m % 60:02d} min"


def built_this_night(c: dict[str, Any]) -> bool:
    """The artifact's build time belongs to this night only when this night built it."""
    return c.get("origin") == "built"
