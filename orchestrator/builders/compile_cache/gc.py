"""Status and gc of the store's compile caches: their size, and trimming them
(`doit gc ccache_max=5G ccache_evict_older=7d`)."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from orchestrator.builders.compile_cache.kind import ccache_binary
from orchestrator.builders.compile_cache.sccache import OWN_DIR
from orchestrator.cache.compile_config import CompileCacheConfig
from orchestrator.errors import UserError
from orchestrator.model.store_layout import StorePaths


def local_usage(directory: Path) -> tuple[int, int]:
    """(bytes, files) of a local compile cache directory (ccache's own files included)."""
    size = files = 0
    for dirpath, _, names in os.walk(directory):
        for n in names:
            try:
                size += os.lstat(os.path.join(dirpath, n)).st_size
                files += 1
            except OSError:
                pass
    return size, files


def find_ccache(store_root: Path) -> Path | None:
    """A ccache binary from one of the store's toolchains (for status and gc)."""
    tcs = StorePaths(store_root).toolchains
    for tc in sorted(tcs.iterdir()) if tcs.is_dir() else []:
        if (b := ccache_binary(tc / "debs" / "root")) is not None:
            return b
    return None


def trim_request(variables: dict[str, str]) -> tuple[str | None, str | None]:
    """`doit gc ccache_max=5G ccache_evict_older=7d`: the checked values (UserError naming the
    variable otherwise), or None where not asked."""
    max_size, older = variables.get("ccache_max"), variables.get("ccache_evict_older")
    if max_size is not None:
        try:
            CompileCacheConfig(max_size=max_size)
        except ValueError:
            raise UserError(f"ccache_max={max_size!r}: use a size such as 5G or 500M") from None
    if older is not None and not (older[:-1].isdigit() and older[-1:] in ("s", "d")):
        raise UserError(f"ccache_evict_older={older!r}: use an age such as 7d or 3600s")
    return max_size, older


def trim_sccache(directory: Path, max_size: str | None, older_than: str | None) -> None:
    """sccache has no cleanup command: delete its cache files least recently used first
    (by mtime) to max_size, and those unused for older_than. Safe because every build stops
    its server (a server re-reads the directory when it starts)."""
    entries = []
    for dirpath, dirnames, names in os.walk(directory):
        if Path(dirpath) == directory and OWN_DIR in dirnames:
            dirnames.remove(OWN_DIR)  # the launcher script and stand-ins, not cache entries
        for n in names:
            p = Path(dirpath) / n
            if p.suffix == ".log":
                continue
            try:
                st = p.stat()
            except OSError:
                continue
            entries.append((st.st_mtime, st.st_size, p))
    entries.sort()
    now = time.time()
    keep = sum(size for _, size, _ in entries)
    limit = parse_size(max_size) if max_size is not None else None
    for mtime, size, p in entries:
        old = older_than is not None and now - mtime > parse_age(older_than)
        if old or (limit is not None and keep > limit):
            p.unlink(missing_ok=True)
            keep -= size


def parse_size(text: str) -> int:
    units = {"K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
             "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    num = text.rstrip("KMGTi")
    return int(float(num) * units[text[len(num):]])


def parse_age(text: str) -> float:
    return float(text[:-1]) * (86400 if text.endswith("d") else 1)


def trim(store_root: Path, max_size: str | None, older_than: str | None) -> str:
    """Trim the store's compile cache (LRU down to max_size; entries unused for older_than);
    returns the size line."""
    directory = StorePaths(store_root).ccache
    if directory.is_dir() and (max_size or older_than):
        binary = find_ccache(store_root)
        if binary is None:
            raise UserError(f"no ccache in any toolchain of {store_root}; run `doit toolchain`")
        env = {**os.environ, "CCACHE_DIR": str(directory),
               "CCACHE_CONFIGPATH": str(directory / "ccache.conf")}
        if older_than is not None:
            subprocess.run([binary, "--evict-older-than", older_than], env=env, check=True,
                           capture_output=True)
        if max_size is not None:
            subprocess.run([binary, "--cleanup"], env={**env, "CCACHE_MAXSIZE": max_size},
                           check=True, capture_output=True)
    sdir = StorePaths(store_root).sccache
    if sdir.is_dir() and (max_size or older_than):
        trim_sccache(sdir, max_size, older_than)
    size, files = local_usage(directory)
    line = f"compile cache: {size / 1e6:.1f} MB in {files} files ({directory})"
    if sdir.is_dir():
        ssize, sfiles = local_usage(sdir)
        line += f"; sccache: {ssize / 1e6:.1f} MB in {sfiles} files ({sdir})"
    return line
