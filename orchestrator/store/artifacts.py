"""The content-addressed store: staging, atomic commit, hard-link dedupe, locks, gc. Its
layout is model.store_layout.StorePaths (docs/contracts.md)."""
from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import fs
from orchestrator.fs import TEMP_RE, is_stale_temp, remove_tree, temp_in, temp_sibling, write_atomic
from orchestrator.hashing import pretty_json, remember_sha256
from orchestrator.model.store_layout import MANIFEST_NAME, StorePaths
from orchestrator.store import roots_lock
from orchestrator.store.stage_record import NS, STAGE_RECORD, StageRecord, seen_of, write_record

if TYPE_CHECKING:  # filelock (asyncio with it) is imported when a lock is taken; the
    # manifest's model (pydantic) when one is read: the fast path (plan_memo) uses the store
    from filelock import FileLock

    from orchestrator.model.manifest import Manifest

ARTIFACT_RE = re.compile(
    r"^(?P<id>[0-9a-f]{40})-(?P<recipe>[a-z0-9][a-z0-9_.-]*?)-(?P<variant>[a-z0-9][a-z0-9_.-]*)$")


@dataclass
class CommitStats:
    files: int = 0
    bytes_new: int = 0       # bytes that became new inodes in the store
    bytes_linked: int = 0    # bytes hard-linked from content already in the store


def pool_name(sha256: str, executable: bool) -> str:
    """The name of a content's inode in links/ (its exec bit is part of the inode)."""
    return sha256 + ("-x" if executable else "")


def _entries(directory: Path) -> list[Path]:
    """The entries of `directory`; none when it is not there (any more)."""
    try:
        return list(directory.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []


class Store:
    def __init__(self, root: Path) -> None:
        self.root = Path(root).absolute()
        self.paths = paths = StorePaths(self.root)
        self.store_dir, self.tmp_dir, self.build_dir = paths.store, paths.tmp, paths.build
        self.toolchains_dir, self.links_dir = paths.toolchains, paths.links
        self.locks_dir, self.gcroots_dir = paths.locks, paths.gcroots
        self.last_commit = CommitStats()
        self._records: dict[Path, StageRecord] = {}  # stage -> what reuse_unchanged saw

    def ensure(self) -> Store:
        for d in (self.store_dir, self.tmp_dir, self.build_dir, self.toolchains_dir,
                  self.links_dir, self.locks_dir, self.gcroots_dir):
            d.mkdir(parents=True, exist_ok=True)
        return self

    # -- lookup ---------------------------------------------------------------------------
    def artifact_path(self, manifest_name: str) -> Path:
        return self.store_dir / manifest_name

    def find(self, artifact_id: str) -> Path | None:
        if not re.fullmatch(r"[0-9a-f]{40}", artifact_id):
            return None
        for p in self.store_dir.glob(f"{artifact_id}-*"):
            if ARTIFACT_RE.match(p.name) and (p / MANIFEST_NAME).is_file():
                return p
        return None

    def artifacts(self) -> list[Path]:
        if not self.store_dir.is_dir():
            return []
        return sorted(p for p in self.store_dir.iterdir()
                      if ARTIFACT_RE.match(p.name) and (p / MANIFEST_NAME).is_file())

    @staticmethod
    def read_manifest(path: Path) -> Manifest:
        from orchestrator.model.manifest import Manifest

        return Manifest.model_validate_json((path / MANIFEST_NAME).read_text())

    def lock(self, name: str, timeout: float = -1) -> FileLock:
        self.locks_dir.mkdir(parents=True, exist_ok=True)
        from filelock import FileLock

        return FileLock(str(self.locks_dir / f"{name}.lock"), timeout=timeout)

    # -- staging --------------------------------------------------------------------------
    def new_temp(self, name: str) -> Path:
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        path = temp_in(self.tmp_dir, name)
        path.mkdir()
        return path

    @contextlib.contextmanager
    def staging(self, name: str) -> Iterator[Path]:
        """A fresh temp dir under tmp/; removed afterwards unless it was committed away."""
        path = self.new_temp(name)
        try:
            yield path
        finally:
            if path.exists():
                remove_tree(path)

    def stale_temps(self) -> list[Path]:
        """Temps (`fs.temp_name`) in tmp/, toolchains/, store/, gcroots/, cache/, git/ and
        each build/<key>/ whose owning process is gone. A directory another process removes
        meanwhile is no error: it has no temps left."""
        builds = [d for d in _entries(self.build_dir) if d.is_dir()]
        return [p for parent in (self.tmp_dir, self.toolchains_dir, self.store_dir,
                                 self.gcroots_dir, self.paths.cache, self.paths.git, *builds)
                for p in _entries(parent) if is_stale_temp(p.name)]

    def clean_stale(self) -> list[Path]:
        """Remove the stale temps (`stale_temps`); returns the ones this process removed.
        Safe with concurrent cleaners (two builds, a build and a gc): each is claimed by a
        rename to a temp name of this process first; only the cleaner whose rename worked
        removes it. One killed meanwhile leaves a temp of its pid, stale for the next."""
        removed = []
        for p in self.stale_temps():
            claimed = temp_sibling(p.with_name(TEMP_RE.sub("", p.name).lstrip(".") or "stale"))
            try:
                os.rename(p, claimed)
            except FileNotFoundError:  # another cleaner claimed it first
                continue
            remove_tree(claimed)
            removed.append(p)
        return removed

    # -- commit ---------------------------------------------------------------------------
    def link_for(self, sha256: str, executable: bool) -> Path | None:
        p = self.links_dir / pool_name(sha256, executable)
        return p if p.is_file() else None

    def _dedupe(self, staged: Path, manifest: Manifest) -> CommitStats:
        """Give each staged file its pool inode (linked from links/ when the content is there,
        else linked into it), with its final read-only mode. A file no other name links yet
        (new content, mostly) is linked into the pool first, and the pool is asked only
        when that name is taken: a pulled file, created with its final mode, costs a stat and
        a link. Paths are plain strings: pathlib costs more than the work for each of 10k
        small files."""
        stats = CommitStats()
        self.links_dir.mkdir(parents=True, exist_ok=True)
        links, root = str(self.links_dir), str(staged)
        for entry in manifest.files:
            if entry.kind != "file":
                continue
            stats.files += 1
            f = f"{root}/{entry.path}"
            executable = bool(entry.mode & 0o111)
            mode = 0o555 if executable else 0o444
            pooled = f"{links}/{pool_name(entry.sha256 or '', executable)}"
            fst = os.stat(f)
            chmod = stat.S_IMODE(fst.st_mode) != mode
            if fst.st_nlink == 1:
                if chmod:
                    os.chmod(f, mode)
                    chmod = False
                if self._pool(f, pooled):
                    stats.bytes_new += entry.size
                    continue
            try:
                pst = os.stat(pooled)
            except OSError:
                pst = None
            if pst is not None and stat.S_ISREG(pst.st_mode):
                if (pst.st_ino, pst.st_dev) == (fst.st_ino, fst.st_dev):
                    if chmod:  # a pool inode has its mode already
                        os.chmod(f, mode)
                    stats.bytes_linked += entry.size
                    continue
                if pst.st_size == entry.size:
                    tmp = str(temp_sibling(Path(f)))
                    os.link(pooled, tmp)
                    os.replace(tmp, f)
                    stats.bytes_linked += entry.size
                    continue
            if chmod:
                os.chmod(f, mode)
            self._pool(f, pooled)
            stats.bytes_new += entry.size
        return stats

    @staticmethod
    def _pool(f: str, pooled: str) -> bool:
        """Link `f` into the pool as `pooled`: False if that name is taken (EXDEV, EMLINK: kept)."""
        try:
            os.link(f, pooled)
        except FileExistsError:
            return False
        except OSError as e:
            if e.errno not in (errno.EXDEV, errno.EMLINK):
                raise
        return True

    def reuse_unchanged(self, stage: Path, build_dir: Path, epoch: str,
                        source_of: Callable[[str], Path | None],
                        files: dict[str, list[Any]]) -> StageRecord:
        """Give each staged file that is a copy of an unchanged file its committed inode
        from links/, so that neither commit nor verify reads it again.

        `source_of(staged path)` names the file the install copied (builders.install_map);
        `epoch` stands for everything else the copy depends on (configure arguments, install
        scripts). A staged file is the same as last time when the build tree's record has it
        with the same size and exec bit, copied under the same epoch from a source with the
        same (device, inode, size, mtime_ns, ctime_ns): no write to the source can keep all
        of these. `files` is that record (stage_record.read_record under `epoch`). Everything
        else (unknown sources, a reconfigure, no record) is hashed by the commit as before.
        Only a pool inode is linked in (read-only, named by its sha256, never written), so no
        later build can change a committed file."""
        record = StageRecord(build_dir / STAGE_RECORD, epoch)
        self._records[stage] = record
        linked: list[tuple[Path, str]] = []
        for dirpath, _, names in os.walk(stage):
            for name in names:
                f = Path(dirpath) / name
                rel = f.relative_to(stage).as_posix()
                source = source_of(rel)
                st = f.lstat()
                if source is None or not stat.S_ISREG(st.st_mode):
                    continue
                try:
                    src = source.stat()
                except OSError:
                    continue
                if st.st_mtime_ns // NS != src.st_mtime_ns // NS or src.st_ctime_ns > st.st_ctime_ns:
                    continue  # not a plain copy of the source as it is now (the install gives
                    # a copy its source's mtime; a source changed after the copy is newer)
                seen = record.seen[rel] = seen_of(st.st_size, st.st_mode, src)
                found = self._pooled(files.get(rel), seen)
                if found is None:
                    continue
                pooled, pool_st = found
                if pool_st.st_ino != st.st_ino:  # else the builder linked it (pooled_copy)
                    tmp = temp_sibling(f)
                    try:
                        os.link(pooled, tmp)
                    except OSError:  # too many links, another device: hashed as before
                        continue
                    os.replace(tmp, f)
                linked.append((f, str(files[rel][-1])))
        for f, digest in linked:  # after every link: a link changes the inode's ctime
            remember_sha256(f.lstat(), digest)
        record.reused = len(linked)
        return record

    def pooled_copy(self, files: dict[str, list[Any]], rel: str, source: Path) -> Path | None:
        """The pool inode the last commit staged as `rel`, a shutil.copy2 of `source`, when
        `source` is as it was then (`files`: stage_record.read_record's): a builder links it
        instead of copying the file again."""
        try:
            src = source.stat()
        except OSError:
            return None
        found = self._pooled(files.get(rel), seen_of(src.st_size, src.st_mode, src))
        return found[0] if found else None

    def _pooled(self, old: object, seen: list[Any]) -> tuple[Path, os.stat_result] | None:
        """The pool inode (and its stat) of a record entry `old` whose copy and source were
        `seen` as now."""
        if not (isinstance(old, list) and old[:-1] == seen):
            return None
        pooled = self.links_dir / pool_name(str(old[-1]), seen[1])
        try:
            st = pooled.stat()
        except OSError:
            return None
        return (pooled, st) if stat.S_ISREG(st.st_mode) and st.st_size == seen[0] else None

    def commit(self, staged: Path, manifest: Manifest) -> Path:
        """Dedupe, write manifest.json, make read-only, rename into store/ in one step."""
        self.store_dir.mkdir(parents=True, exist_ok=True)
        final = self.store_dir / manifest.name
        with self.lock(f"artifact-{manifest.id}"), roots_lock.holding(self.root):  # gc waits
            if (final / MANIFEST_NAME).is_file():
                remove_tree(staged)
                self.last_commit = CommitStats()
                return final
            self.last_commit = self._dedupe(staged, manifest)
            durable = fs.durable_commits()
            write_atomic(staged / MANIFEST_NAME, pretty_json(manifest.model_dump(mode="json"),
                                                             flat_items=1),
                         mode=0o444, durable=durable)
            for dirpath, _, names in os.walk(staged, topdown=False):
                if durable:
                    fs.fsync_tree_level(Path(dirpath), names)
                os.chmod(dirpath, 0o555)
            if final.exists():  # a half-present leftover without manifest: cannot happen
                remove_tree(final)  # via rename, but be safe against manual meddling
            os.chmod(staged, 0o755)  # rename of a dir needs write access to it on some FS
            os.rename(staged, final)
            os.chmod(final, 0o555)
            if durable:
                fs.fsync_dir(self.store_dir)
            record = self._records.pop(staged, None)
            if record is not None:
                write_record(self.root, record, {e.path: e.sha256 for e in manifest.files
                                                 if e.kind == "file" and e.sha256 is not None})
        return final

    # -- gc -------------------------------------------------------------------------------
    def delete_artifact(self, path: Path) -> None:
        """Move out of store/ first (atomic), then delete at leisure."""
        grave = temp_in(self.tmp_dir, f"gc-{path.name}")
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        fs.make_writable(path)
        os.rename(path, grave)
        remove_tree(grave)

    def prune_links(self) -> int:
        """Drop pool entries no artifact uses any more (link count 1)."""
        freed = 0
        if not self.links_dir.is_dir():
            return 0
        for p in self.links_dir.iterdir():
            st = p.lstat()
            if st.st_nlink <= 1:
                freed += st.st_size
                p.unlink()
        return freed

    def gc(self, roots: Iterable[Path]) -> list[Path]:
        keep = {Path(os.path.realpath(r)) for r in roots}
        deleted = []
        with self.lock("gc"):
            self.clean_stale()
            for kept in [*self.tmp_dir.glob("failed-*"), *self.tmp_dir.glob("staged-*")] \
                    if self.tmp_dir.is_dir() else []:
                remove_tree(kept)  # failed verifies' staged outputs; steps' (realise/steps.py)
            for art in self.artifacts():
                if Path(os.path.realpath(art)) not in keep:
                    self.delete_artifact(art)
                    deleted.append(art)
            self.prune_links()
        return deleted
