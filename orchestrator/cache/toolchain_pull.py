"""Pull a toolchain instead of materializing it: trusted `tc/` record → blobs (sha256 checked
while downloading, or hard links from the store's pool) → a temp dir beside the target →
relocated to this store's path → toolchain-files.json written from the record → every file
re-hashed against it → one rename into <store>/toolchains/<hash>/.

Anything refused (no record, untrusted or bad signature, wrong hash, a path the record
must not name, a cache that is down) leaves nothing behind; ensure_toolchain then builds
the toolchain from the locked wheels and debs.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from rich.markup import escape

from orchestrator.cache.backend import Backend
from orchestrator.cache.cache_toml import CacheConfig, load_config
from orchestrator.cache.errors import CacheError
from orchestrator.cache.pull import assemble, first_delivering, parse_signed, transfer_summary
from orchestrator.cache.signing import TrustedKeys
from orchestrator.cache.toolchain_record import ToolchainRecord, toolchain_record_key
from orchestrator.cache.transfer import TransferStats
from orchestrator.console import console, working
from orchestrator.fs import remove_tree, temp_in
from orchestrator.hashing import remember_sha256, sha256_bytes
from orchestrator.model.lock import Lock, PythonEntry
from orchestrator.store import tree_manifest
from orchestrator.store.artifacts import Store
from orchestrator.toolchain.materialize import FILES_MANIFEST, TOOLCHAIN_JSON, toolchain_hash


def fetch_toolchain_record(backend: Backend, lock: Lock,
                           trusted: TrustedKeys) -> ToolchainRecord | None:
    """The lock's toolchain record if the cache has one; CacheError if it is not trustworthy
    or is not this lock's (digest, interpreter)."""
    key = toolchain_record_key(toolchain_hash(lock))
    raw = backend.get(key)
    if raw is None:
        return None
    where = f"{backend.url}{key}"
    record, _ = parse_signed(raw, where, trusted, ToolchainRecord)
    if record.lock_digest != lock.digest():
        raise CacheError(f"refused {where}: it is the toolchain of another lock digest")
    py = lock.entries.get("python")
    if not isinstance(py, PythonEntry) or record.python != py.path:
        raise CacheError(f"refused {where}: its interpreter {record.python!r} is not the lock's")
    return record


def _relocate(stage: Path, record: ToolchainRecord, final: Path, where: str) -> dict[str, str]:
    """Rewrite the push-time root to `final` in the record's text files (new inodes: a file
    may be a hard link into the store's pool). Returns path -> sha256 of the new content."""
    old, new = record.root.encode(), str(final).encode()
    modes = {f.path: f.mode for f in record.files}
    out: dict[str, str] = {}
    for rel in record.relocate:
        p = stage / rel
        data = p.read_bytes()
        if b"\0" in data:
            raise CacheError(f"refused {where}: {rel} is binary; relocating it is not safe")
        data = data.replace(old, new)
        p.unlink()
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(p, 0o755 if modes[rel] & 0o111 else 0o644)
        out[rel] = sha256_bytes(data)
        remember_sha256(os.lstat(p), out[rel])  # what this process wrote: not read again
    return out


def _write_manifest(stage: Path, record: ToolchainRecord, changed: dict[str, str]) -> dict:
    """toolchain-files.json from the record's hashes and the assembled files' lstat."""
    entries: dict[str, dict] = {}
    base = f"{stage}/"
    for f in record.files:
        if f.kind == "symlink":
            entries[f.path] = {"target": f.target}
            continue
        st = os.lstat(base + f.path)
        entries[f.path] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino,
                           "sha256": changed.get(f.path, f.sha256), "exec": bool(f.mode & 0o111)}
    (stage / FILES_MANIFEST).write_text(tree_manifest.dumps(entries))
    return entries


def pull_toolchain_record(record: ToolchainRecord, lock: Lock, store: Store, backend: Backend,
                          final: Path, jobs: int, stats: TransferStats) -> None:
    """Materialize a trusted record at `final` (the caller holds the toolchain's lock)."""
    where = f"{backend.url}{toolchain_record_key(record.hash)}"
    tmp = temp_in(store.toolchains_dir, final.name)
    tmp.mkdir()
    try:
        assemble(record.files, f"pull toolchain {record.hash[:12]}", store, backend, tmp, jobs,
                 stats)
        with working(f"pull toolchain {record.hash[:12]}: relocating and re-hashing its files"):
            entries = _write_manifest(tmp, record, _relocate(tmp, record, final, where))
            found = tree_manifest.full_check(tmp, entries, FILES_MANIFEST)
        if found:
            raise CacheError(f"refused {where}: after assembly {found.first()}")
        try:
            facts = json.loads((tmp / TOOLCHAIN_JSON).read_text())
        except (ValueError, UnicodeDecodeError):
            facts = None
        if not isinstance(facts, dict) or facts.get("lock_digest") != lock.digest():
            raise CacheError(f"refused {where}: its {TOOLCHAIN_JSON} is not this lock's")
        if final.exists() or final.is_symlink():
            remove_tree(final)
        os.rename(tmp, final)
    except OSError as e:  # a name or size the local filesystem refuses
        remove_tree(tmp)
        raise CacheError(f"refused {where}: cannot materialize it here "
                         f"({e.strerror or e})") from None
    except BaseException:
        remove_tree(tmp)
        raise


def pull_toolchain(store: Store, lock: Lock, final: Path, config: CacheConfig,
                   stats: TransferStats, urls: list[str] | None = None) -> str | None:
    """Try each substituter in order; the URL the toolchain came from, or None when none has
    it. CacheError for the first refusal when none delivered (later ones are warnings)."""
    trusted = config.trusted()

    def attempt(url: str, backend: Backend) -> bool | None:
        record = fetch_toolchain_record(backend, lock, trusted)
        if record is None:
            return None
        start = time.monotonic()
        pull_toolchain_record(record, lock, store, backend, final, config.jobs, stats)
        stats.seconds = time.monotonic() - start
        return True

    got = first_delivering(urls if urls is not None else config.substituters, config, attempt)
    return got[1] if got is not None else None


def substitute_toolchain(repo_root: Path, store: Store, lock: Lock, final: Path) -> str | None:
    """ensure_toolchain's substituter: the line saying where the toolchain came from, or None
    (a refusal or an unreachable cache is one warning line; the caller then builds it)."""
    config = load_config(repo_root)
    if not config.substituters:
        return None
    stats = TransferStats()
    try:
        url = pull_toolchain(store, lock, final, config, stats)
    except CacheError as e:
        console.print(f"[yellow]warning:[/] {escape(str(e))}; materializing the toolchain from "
                      "the lock", soft_wrap=True)
        return None
    if url is None:
        return None
    return f"toolchain {final.name[:12]}… substituted from {url}: {transfer_summary(stats)}"
