"""File-system primitives: atomic write and symlink, tree removal, and the one temp naming.

Every temp file or directory the package creates is named by `temp_name`
(`<name>.tmp-<pid>-<hex>`, hidden with a leading dot when it sits beside its target), so
`Store.clean_stale` and `Workspace.clean_stale` can tell from the name alone whose it is
and remove it once that process is gone.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple


class FileSig(NamedTuple):
    """What says a file is unchanged without reading it: any write changes the size, the
    mtime or the ctime (a rewrite that restores the mtime still moves the ctime), a replace by
    rename the inode. The one stat signature of the caches and memos (a list in their JSON);
    each adds what it needs beside it (the path, the device, the mode)."""
    size: int
    mtime_ns: int
    ino: int
    ctime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileSig:
        return cls(st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)

TEMP_RE = re.compile(r"\.tmp-(?P<pid>\d+)-[0-9a-f]+$")


def temp_name(name: str) -> str:
    """`<name>.tmp-<pid>-<hex>`: unique per process and call, owner readable by `temp_owner`."""
    return f"{name}.tmp-{os.getpid()}-{os.urandom(4).hex()}"


def temp_in(directory: Path, name: str) -> Path:
    """A temp path `<directory>/<name>.tmp-<pid>-<hex>` (not created)."""
    return directory / temp_name(name)


def temp_sibling(path: Path) -> Path:
    """A hidden temp path `.<name>.tmp-<pid>-<hex>` beside path (not created), for a rename
    over it: same directory, so the same file system."""
    return path.with_name("." + temp_name(path.name))


def temp_owner(name: str) -> int | None:
    """The pid that made the temp named `name`, or None when it is not a temp name."""
    m = TEMP_RE.search(name)
    return int(m["pid"]) if m else None


def is_stale_temp(name: str) -> bool:
    """A temp name whose owning process is gone (what a kill between write and rename leaves)."""
    pid = temp_owner(name)
    return pid is not None and not pid_alive(pid)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def make_writable(path: Path) -> None:
    """Give the owner write permission on a tree so it can be deleted or moved."""
    if path.is_symlink() or not path.exists():
        return
    for dirpath, _dirnames, _ in os.walk(path):
        os.chmod(dirpath, stat.S_IMODE(os.lstat(dirpath).st_mode) | stat.S_IWUSR | stat.S_IXUSR)


def remove_tree(path: Path) -> None:
    """Remove a file, a symlink or a (read-only) tree; nothing there is fine."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
        return
    if not path.exists():
        return
    import shutil  # here: shutil imports bz2 and lzma, 2 ms of every verify process

    make_writable(path)
    shutil.rmtree(path, ignore_errors=False)


def durable_commits() -> bool:
    """ORCH_FSYNC=1: a commit (store entry, pulled toolchain) is fsynced, every file and
    directory, before it is renamed into place. Off by default, as Nix's fsync-store-paths:
    the rename keeps a killed run's output invisible either way; only a power loss or a
    kernel crash may then leave a committed entry with files the disk never got, which
    `doit verify` reports (each file's sha256 is in its manifest)."""
    return os.environ.get("ORCH_FSYNC", "0") == "1"


def fsync_tree_level(directory: Path, names: list[str]) -> None:
    """fsync the regular files `names` of `directory`, then the directory itself."""
    for name in names:
        p = directory / name
        if p.is_file() and not p.is_symlink():
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    fsync_dir(directory)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_writer(path: Path, mode: int = 0o644, durable: bool = True) -> Iterator[BinaryIO]:
    """A binary file beside path that replaces path by one rename when the block ends
    (readers see the old or the new file); removed instead if the block raises.
    durable=False skips the fsync, for caches that may be lost on a crash."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(path)
    try:
        with open(tmp, "wb") as f:
            yield f
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_atomic(path: Path, data: str | bytes, mode: int = 0o644, durable: bool = True) -> None:
    """Write beside the target, fsync, rename: readers see the old or the new file."""
    with atomic_writer(path, mode, durable) as f:
        f.write(data.encode() if isinstance(data, str) else data)


def atomic_symlink(target: str | Path, link: Path) -> None:
    """Point link at target in one rename (a reader sees the old or the new target)."""
    tmp = temp_sibling(link)
    os.symlink(str(target), tmp)
    try:
        os.replace(tmp, link)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class JsonDictFile:
    """A dict kept in one JSON file (a cache: stat answers, probe answers): read once, an
    unreadable or foreign file read as empty; written atomically, only when `dirty`, and not
    fsynced (losing it costs a recomputation, never a wrong answer)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.dirty = False
        try:
            loaded = json.loads(path.read_text())
        except (OSError, ValueError):
            loaded = {}
        self.entries: dict[str, list[Any]] = loaded if isinstance(loaded, dict) else {}

    def put(self, key: str, value: list[Any]) -> None:
        self.entries[key] = value
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        write_atomic(self.path, json.dumps(self.entries, separators=(",", ":")), durable=False)
        self.dirty = False
