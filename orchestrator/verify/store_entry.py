"""A committed store entry against its manifest.json: nothing added, changed or missing.

Entries are read-only, but root ignores that (e.g. Python writing __pycache__/*.pyc into
a profile's package); this re-reads every file and names each difference.
"""
from __future__ import annotations

from pathlib import Path

from orchestrator.model.manifest import FileEntry, Manifest
from orchestrator.store.tree_manifest import Changes


def _same(a: FileEntry, b: FileEntry) -> bool:
    return (a.kind, a.sha256, a.target, a.mode & 0o111) == (b.kind, b.sha256, b.target, b.mode & 0o111)


def entry_changes(path: Path, manifest: Manifest) -> Changes:
    """Files of the entry at `path` that its manifest does not list, lists otherwise, or misses."""
    now = {f.path: f for f in Manifest.scan_files(path)}
    want = {f.path: f for f in manifest.files}
    return Changes(changed=sorted(p for p in want if p in now and not _same(want[p], now[p])),
                   missing=sorted(set(want) - set(now)),
                   extra=sorted(set(now) - set(want)))


def changes_summary(changes: Changes, limit: int = 20) -> str:
    """The report: one line per difference (at most `limit` of each kind)."""
    lines = []
    for what, paths in (("changed", changes.changed), ("missing", changes.missing),
                        ("extra", changes.extra)):
        lines += [f"  {what}: {p}" for p in paths[:limit]]
        if len(paths) > limit:
            lines.append(f"  ... and {len(paths) - limit} more {what}")
    return "\n".join(lines)
