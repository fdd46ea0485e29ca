"""A build tree's stage record: what its last commit staged as plain copies of build-tree or
source files, so the next build of that tree can give an unchanged copy its committed inode
(Store.reuse_unchanged after the install, Store.pooled_copy instead of a builder's copy).

In the build tree, STAGE_RECORD holds {"epoch", "files": {path: [size, exec, source dev,
ino, size, mtime_ns, ctime_ns, sha256]}, "mac"}: HMAC'd under the store's secret, so a record
edited by anyone who cannot read <store>/cache/stage-records.key links nothing.
"""
from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.fs import FileSig, write_atomic
from orchestrator.hashing import canonical_json, local_secret
from orchestrator.model.store_layout import StorePaths

STAGE_RECORD = ".orch-stage-record.json"
NS = 1_000_000_000


@dataclass
class StageRecord:
    """What `reuse_unchanged` saw of a stage, written into its build tree at commit."""
    path: Path                      # <build tree>/.orch-stage-record.json
    epoch: str                      # configure arguments + install scripts
    # staged path -> [size, exec, source dev, *FileSig of the source]
    seen: dict[str, list[Any]] = field(default_factory=dict)
    reused: int = 0                 # staged files replaced by their pool inode (not hashed)


def seen_of(size: int, mode: int, src: os.stat_result) -> list[Any]:
    """A record's entry less its sha256: the copy's size and exec bit, the source's stat."""
    return [size, bool(mode & 0o111), src.st_dev, *FileSig.of(src)]


def record_mac(store_root: Path, epoch: str, files: object) -> str:
    key = local_secret(StorePaths(store_root).stage_record_key)
    return hmac.new(key, canonical_json([epoch, files]), hashlib.sha256).hexdigest()


def read_record(store_root: Path, build_dir: Path, epoch: str) -> dict[str, list[Any]]:
    """The tree's last record's files when this store wrote it under the same epoch; {}
    otherwise (another configure, or not ours: everything is copied and hashed)."""
    try:
        previous = json.loads((build_dir / STAGE_RECORD).read_text())
        files = previous["files"]
        if previous.get("epoch") == epoch and isinstance(files, dict) and hmac.compare_digest(
                str(previous.get("mac")), record_mac(store_root, epoch, files)):
            return files
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return {}


def write_record(store_root: Path, record: StageRecord, digests: dict[str, str]) -> None:
    """The record the next build compares with, for the committed files it saw (best effort:
    without it the next commit hashes everything, as before)."""
    files = {path: [*record.seen[path], sha] for path, sha in digests.items()
             if path in record.seen}
    with contextlib.suppress(OSError):
        write_atomic(record.path, json.dumps({"epoch": record.epoch, "files": files,
                                              "mac": record_mac(store_root, record.epoch, files)}),
                     durable=False)
