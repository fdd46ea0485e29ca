"""The file list of each path source tree a plan hashed, kept beside the store's caches
(`<store>/cache/source-trees/<tree_sha256>.json`: {relative path: [kind, sha256 or link
target]}), so that `doit why` can name the files that differ between two trees it only
knows by their digests. Written once per distinct tree; a missing list only means `doit why`
cannot name the files."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from orchestrator.fs import write_atomic
from orchestrator.hashing import digest_of
from orchestrator.model.store_layout import StorePaths


def listing_path(store_root: Path, tree_sha256: str) -> Path:
    return StorePaths(store_root).listings / f"{tree_sha256}.json"


def keep_listing(store_root: Path, items: list[list[str]]) -> str:
    """The tree's digest (tree_digest's), its file list written if not there yet."""
    digest = digest_of(items)
    path = listing_path(store_root, digest)
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({rel: [kind, value] for rel, kind, value in items},
                                      sort_keys=True), durable=False)
    return digest


@dataclass(frozen=True)
class TreeChanges:
    changed: list[str]
    added: list[str]
    removed: list[str]

    def count(self) -> int:
        return len(self.changed) + len(self.added) + len(self.removed)

    def lines(self, shown: int) -> list[str]:
        """Up to `shown` files (`~ a.cpp`, `+ b.h`, `- c.h`), then how many more."""
        rows = ([f"~ {p}" for p in self.changed] + [f"+ {p}" for p in self.added]
                + [f"- {p}" for p in self.removed])
        more = len(rows) - shown
        return rows[:shown] + ([f"... and {more} more file(s)"] if more > 0 else [])


def tree_changes(store_root: Path, old: str, new: str) -> TreeChanges | None:
    """The files that differ between two listed trees; None when either list is unknown."""
    try:
        a, b = (json.loads(listing_path(store_root, d).read_text()) for d in (old, new))
    except (OSError, ValueError):
        return None
    return TreeChanges(changed=sorted(p for p in a.keys() & b.keys() if a[p] != b[p]),
                       added=sorted(b.keys() - a.keys()), removed=sorted(a.keys() - b.keys()))
