"""Pull: trusted record → blobs (or local hard links) → staged artifact → Store.commit.

Nothing is visible until the final rename inside Store.commit: a refused record, a bad blob,
a cut transfer or a kill leaves the store and every workspace exactly as they were.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from rich.markup import escape

from orchestrator.cache.backend import Backend, record_key
from orchestrator.cache.backends import open_backend
from orchestrator.cache.cache_toml import CacheConfig, load_config
from orchestrator.cache.errors import CacheError
from orchestrator.cache.pack_download import PackWant, download_contents
from orchestrator.cache.signing import TrustedKeys
from orchestrator.cache.transfer import TransferStats
from orchestrator.console import console
from orchestrator.hashing import remember_sha256
from orchestrator.model.cache_record import CacheRecord, Pack
from orchestrator.model.manifest import FileEntry
from orchestrator.model.user_file import MAX_DEPTH, depth_ok
from orchestrator.store.artifacts import Store

T = TypeVar("T")

M = TypeVar("M", bound=BaseModel)


def fetch_record(backend: Backend, artifact_id: str, trusted: TrustedKeys) -> CacheRecord | None:
    """The record for `artifact_id` if the cache has one; CacheError if it is not trustworthy."""
    key = record_key(artifact_id)
    raw = backend.get(key)
    if raw is None:
        return None
    where = f"{backend.url}{key}"
    record, signer = parse_signed(raw, where, trusted, CacheRecord)
    if record.id != artifact_id:
        raise CacheError(f"refused {where}: it describes {record.id}, not {artifact_id}")
    before = record.manifest.origin
    built = before.get("built", {}) if before.get("kind") == "substituted" else before
    record.manifest.origin = {"kind": "substituted", "url": backend.url, "signed_by": signer,
                              "built": built}
    return record


def parse_signed(raw: bytes, where: str, trusted: TrustedKeys, model: type[M]) -> tuple[M, str]:
    """A record's bytes → (validated model, signer), checked in this order: JSON object,
    nesting depth, signature by a trusted key, then the model's own checks. CacheError else."""
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        raise CacheError(f"refused {where}: not valid JSON") from None
    if not isinstance(doc, dict):
        raise CacheError(f"refused {where}: not a JSON object")
    if not depth_ok(doc):
        raise CacheError(f"refused {where}: nested deeper than {MAX_DEPTH} levels")
    signer = trusted.verify(doc, where)
    try:
        return model.model_validate(doc), signer
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise CacheError(f"refused {where}: {msg}" + (f" (at {loc})" if loc else "")) from None


def exact_modes() -> bool:
    """Does this process's umask leave 0o644 and 0o755 as they are, so new files can be
    created with their final mode (no chmod after)? Read from /proc, never changed."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8) & 0o755 == 0
    except (OSError, ValueError, IndexError):
        pass
    return False


def pool_has_entries(store: Store) -> bool:
    try:
        with os.scandir(store.links_dir) as entries:
            return next(entries, None) is not None
    except FileNotFoundError:
        return False


def assemble(files: list[FileEntry], label: str, store: Store, backend: Backend, stage: Path,
             jobs: int, stats: TransferStats,
             packed: dict[str, tuple[Pack, int]] | None = None, read_only: bool = False) -> None:
    """Fill `stage` with these (validated) files: local hard links where possible, else
    download (artifact records and toolchain records alike); `packed`: contents that are
    pack members (CacheRecord.pack_members), the others are loose `cas/` blobs.

    Each distinct content is obtained once; further files with it are linked (or copied when
    their exec bit differs). Pool files are linked as they are (already read-only).
    `read_only`: new files get the store's final modes (0o444, 0o555) as they are created,
    so the commit does not chmod them again (a toolchain's stay writable). Paths
    are plain strings here: pathlib costs more than the work for each of 10k small files.
    """
    packed = packed or {}
    loose: list[tuple[str, int, Path]] = []
    wants: dict[str, PackWant] = {}
    fresh: list[tuple[str, int]] = []   # files to chmod once they exist
    seen: dict[str, str] = {}
    again: list[tuple[str, str, bool]] = []
    made: set[str] = set()
    pool = pool_has_entries(store)  # a new store's pool is empty: no lookups then
    exact = exact_modes()
    modes = {True: 0o555, False: 0o444} if read_only else {True: 0o755, False: 0o644}
    pooled: set[str] = set()  # linked from the pool: the commit leaves these inodes as they are
    root = str(stage)
    for f in files:
        dest = f"{root}/{f.path}"
        parent = dest.rpartition("/")[0]
        if parent not in made:
            os.makedirs(parent, exist_ok=True)
            made.add(parent)
        if f.kind != "file":
            continue
        sha, exe = f.sha256 or "", bool(f.mode & 0o111)
        mode = modes[exe]
        if sha in seen:
            again.append((seen[sha], dest, exe))
            continue
        seen[sha] = dest
        local = store.link_for(sha, exe) if pool else None
        other = store.link_for(sha, not exe) if pool and local is None else None
        if local is not None and local.stat().st_size == f.size:
            os.link(local, dest)
            pooled.add(dest)
        elif other is not None and other.stat().st_size == f.size:
            shutil.copyfile(other, dest)
            fresh.append((dest, mode))
        else:
            if sha in packed:
                pack, index = packed[sha]
                if (want := wants.get(pack.sha256)) is None:
                    want = wants[pack.sha256] = PackWant(pack, {})
                want.wanted[index] = (f.size, dest, mode)
                if not exact:
                    fresh.append((dest, mode))
            else:
                loose.append((sha, f.size, Path(dest)))  # created 0o644
                fresh.append((dest, mode))
            continue
        stats.add(files_linked=1, bytes_linked=f.size)
    download_contents(backend, loose, list(wants.values()), jobs, label, stats)  # path order
    for dest, mode in fresh:
        os.chmod(dest, mode)
    for src, dest, exe in again:
        if bool(os.stat(src).st_mode & 0o111) == exe:
            os.link(src, dest)
        else:
            shutil.copyfile(src, dest)
            os.chmod(dest, modes[exe])
    for f in files:
        if f.kind == "symlink":
            os.symlink(f.target or "", f"{root}/{f.path}")
        elif f.kind == "file" and f.sha256 and (not read_only or f"{root}/{f.path}" in pooled):
            # checked on the way in (a download's sha256, the pool's own name): a later scan
            # in this process (the toolchain's full check, a reverify) does not read it again.
            # An artifact's commit links each new file into the pool, which changes its
            # ctime: its hash remembered now would never be asked for (12k lstat calls).
            remember_sha256(os.lstat(f"{root}/{f.path}"), f.sha256)


def pull_record(record: CacheRecord, store: Store, backend: Backend, jobs: int,
                stats: TransferStats | None = None) -> Path:
    """Materialize a trusted record into the store (one puller per artifact at a time)."""
    stats = stats if stats is not None else TransferStats()
    start = time.monotonic()
    store.ensure()
    with store.lock(f"pull-{record.id}"):
        if (found := store.find(record.id)) is not None:
            return found
        with store.staging(record.name) as stage:
            assemble(record.manifest.files, f"pull {record.name[:12]}", store, backend, stage,
                     jobs, stats, record.pack_members(), read_only=True)
            assembled = time.monotonic()
            path = store.commit(stage, record.manifest)
    stats.download_seconds = assembled - start
    stats.commit_seconds = time.monotonic() - assembled
    stats.seconds = time.monotonic() - start
    return path


def first_delivering(urls: list[str], config: CacheConfig,
                     attempt: Callable[[str, Backend], T | None]) -> tuple[T, str] | None:
    """(attempt's result, url) from the first substituter whose attempt delivers (None: that
    one has nothing). A refusal (CacheError) is held back and raised when no substituter
    delivered, so the user learns why; later refusals, or the first one once another
    delivered, are printed as warnings."""
    first_error: CacheError | None = None
    for url in urls:
        backend = open_backend(url, config)
        try:
            got = attempt(url, backend)
            if got is None:
                continue
            if first_error is not None:  # held back in case it became the error; say it now
                console.print(f"[yellow]warning:[/] {escape(str(first_error))}", soft_wrap=True)
            return got, url
        except CacheError as e:
            if first_error is None:
                first_error = e  # raised below: printed once, by whoever reports it
            else:
                console.print(f"[yellow]warning:[/] {escape(str(e))}", soft_wrap=True)
        finally:
            backend.close()
    if first_error is not None:
        raise first_error
    return None


def pull(store: Store, artifact_id: str, config: CacheConfig, urls: list[str] | None = None,
         stats: TransferStats | None = None, quiet_misses: bool = False) -> tuple[Path, str] | None:
    """Try each substituter in order; return (store path, url) from the first that has it.

    Raises CacheError for the first refusal when no substituter could deliver, so a user
    running `doit pull` learns why; `substitute` below turns that into a warning.
    """
    trusted = config.trusted()
    stats = stats if stats is not None else TransferStats()

    def attempt(url: str, backend: Backend) -> Path | None:
        start = time.monotonic()
        record = fetch_record(backend, artifact_id, trusted)
        stats.record_seconds = time.monotonic() - start
        if record is None:
            if not quiet_misses:
                console.print(f"[dim]{url}: no artifact {artifact_id}[/]")
            return None
        try:
            return pull_record(record, store, backend, config.jobs, stats)
        except OSError as e:  # a name or size the local filesystem refuses
            raise CacheError(f"refused {url}{record_key(artifact_id)}: cannot materialize "
                             f"it here ({e.strerror or e})") from None

    return first_delivering(urls if urls is not None else config.substituters, config, attempt)


def transfer_summary(stats: TransferStats) -> str:
    rate = stats.bytes_downloaded / stats.seconds / 1e6 if stats.seconds else 0.0
    packs = f", {stats.packs_downloaded} pack requests" if stats.packs_downloaded else ""
    return (f"{stats.blobs_downloaded} blobs downloaded ({stats.bytes_downloaded / 1e6:.1f} MB, "
            f"{rate:.1f} MB/s{packs}), {stats.files_linked} files hard-linked from the local store "
            f"({stats.bytes_linked / 1e6:.1f} MB), {stats.seconds:.1f}s")


def substitute(settings, plan, store: Store) -> Path | None:  # noqa: ANN001 (avoid import cycle)
    """realise()'s hook: the artifact from the first substituter that has a trusted copy.

    A down or refusing substituter is a warning, never a failure: the caller then builds.
    """
    if not settings.substitute:
        return None
    config = load_config(settings.repo_root)
    if not config.substituters:
        return None
    stats = TransferStats()
    try:
        got = pull(store, plan.artifact_id, config, stats=stats)
    except CacheError as e:
        console.print(f"[yellow]warning:[/] {escape(str(e))}; building it here",
                      soft_wrap=True)
        return None
    if got is None:
        return None
    path, url = got
    console.print(f"substituted {path.name} from {url}: {transfer_summary(stats)}")
    return path
