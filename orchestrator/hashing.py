"""Canonical JSON and content hashes (files, trees) with a stat cache for no-op runs."""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from orchestrator.fs import FileSig, JsonDictFile, temp_sibling
from orchestrator.memo.file_reads import note_stat

CHUNK = 1 << 20


def canonical_json(obj: Any) -> bytes:
    """Sorted keys, no whitespace, UTF-8: the one byte form a value hashes as."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def pretty_json(obj: Any, flat_items: int | None = None) -> str:
    """Sorted, indented, newline-terminated: what machine-written files look like on disk.
    With `flat_items`, the items of lists nested at least that deep are written one line
    each (a manifest's file entries): json's C encoder writes only that form, indenting is
    its pure-Python encoder (a 12k-file manifest: 0.13 s indented, 0.05 s so)."""
    if flat_items is None:
        return json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    return _indented(obj, 0, flat_items) + "\n"


_ONE_LINE = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode


def _indented(obj: Any, depth: int, flat_items: int) -> str:
    if not obj or not isinstance(obj, (dict, list)):
        return _ONE_LINE(obj)
    pad, end = "  " * (depth + 1), "\n" + "  " * depth
    if isinstance(obj, dict):
        return "{\n" + ",\n".join(f"{pad}{_ONE_LINE(str(k))}: "
                                   f"{_indented(obj[k], depth + 1, flat_items)}"
                                   for k in sorted(obj)) + end + "}"
    if depth >= flat_items:
        return "[\n" + pad + f",\n{pad}".join(map(_ONE_LINE, obj)) + end + "]"
    return "[\n" + ",\n".join(pad + _indented(v, depth + 1, flat_items) for v in obj) + end + "]"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path | str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


# Content hashes this process already knows, by inode identity (device, inode, size,
# mtime_ns, ctime_ns: any write or link changes one of them): the pool inodes a stage was
# given by Store.reuse_unchanged, so that Manifest.scan_files does not read them again.
_KNOWN: dict[tuple[int, FileSig], str] = {}


def _identity(st: os.stat_result) -> tuple[int, FileSig]:
    return (st.st_dev, FileSig.of(st))


def remember_sha256(st: os.stat_result, digest: str) -> None:
    """Record that the inode `st` describes (as it is now) has content `digest`."""
    _KNOWN[_identity(st)] = digest


def remembered_sha256(st: os.stat_result) -> str | None:
    """The content recorded for the inode `st` describes (as it is now), if any."""
    return _KNOWN.get(_identity(st))


def known_sha256(path: Path | str, st: os.stat_result) -> str:
    """sha256 of `path`, whose lstat is `st`: remembered for that identity, else read."""
    return _KNOWN.get(_identity(st)) or sha256_file(path)


def local_secret(path: Path) -> bytes:
    """An HMAC key private to this store's owner: 32 random bytes in `path` (mode 0600),
    made by the first process that needs it (the others read the one that won)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, os.urandom(32))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return path.read_bytes()


def digest_of(obj: Any) -> str:
    return sha256_bytes(canonical_json(obj))


class StatCache(JsonDictFile):
    """Maps (path, size, mtime_ns, ino, ctime_ns) to sha256 so unchanged files are not re-read.
    A stale entry is impossible to hit because any write to a file changes its mtime/ctime."""

    def sha256(self, file: Path) -> str:
        st = file.stat()
        key = str(file)
        note_stat(key, st)
        sig = list(FileSig.of(st))
        hit = self.entries.get(key)
        if hit and hit[:4] == sig:
            return hit[4]
        digest = sha256_file(file)
        self.put(key, sig + [digest])
        return digest


def iter_tree(root: Path, exclude_dirs: Iterable[str] = (".git",)) -> list[Path]:
    """Every regular file and symlink under root, sorted, skipping excluded directory names."""
    skip = set(exclude_dirs)
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        # os.walk lists links to directories among dirnames: keep them as entries, never descend.
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        dirnames[:] = sorted(d for d in dirnames if d not in skip and d not in links)
        out.extend(Path(dirpath) / name for name in filenames + links)
    return sorted(out)


def tree_digest(root: Path, cache: StatCache | None = None,
                exclude_dirs: Iterable[str] = (".git",),
                exclude_files: Iterable[str] = ()) -> str:
    """Hash of a directory's content: relative paths, exec bits, symlink targets, file hashes.
    exclude_files: paths relative to root (e.g. generated IDE files) left out."""
    return digest_of(tree_items(root, cache, exclude_dirs, exclude_files))


def tree_items(root: Path, cache: StatCache | None = None,
               exclude_dirs: Iterable[str] = (".git",),
               exclude_files: Iterable[str] = ()) -> list[list[str]]:
    """What tree_digest hashes: [relative path, "f"|"x"|"l", sha256 or link target] each."""
    items = []
    skip_files = set(exclude_files)
    for f in iter_tree(root, exclude_dirs):
        rel = f.relative_to(root).as_posix()
        if rel in skip_files:
            continue
        if f.is_symlink():
            items.append([rel, "l", os.readlink(f)])
        else:
            digest = cache.sha256(f) if cache else sha256_file(f)
            items.append([rel, "x" if os.access(f, os.X_OK) else "f", digest])
    return items
