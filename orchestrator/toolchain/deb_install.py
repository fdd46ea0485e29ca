"""The lock's Debian packages, unpacked (never installed) into a toolchain being materialized,
through a cache kept once per machine.

A package is fetched once per machine into DEB_CACHE (`~/.cache/orchestrator/debs`, or
$ORCH_DEB_CACHE): with `apt-get download` when the machine's apt sources list it, else from the
mirror those sources name, at `<pool>/<filename>` (DebEntry.pool: CUDA 12.4 from trixie's
non-free, ~1 GB); either way checked against the lock's sha256 before it enters the cache. Its
unpacked tree (less the members `omit` names) is cached beside it, keyed by the sha256 and the
patterns, so a second toolchain of the same packages copies a tree instead of decompressing
a gigabyte again. Every cache entry appears by one rename once complete.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import requests
from filelock import FileLock

from orchestrator.console import console
from orchestrator.errors import UserError, is_no_space, no_space
from orchestrator.fs import remove_tree, temp_in
from orchestrator.hashing import digest_of, sha256_file
from orchestrator.lock.apt_suite import mirror_uri
from orchestrator.model.lock import DebEntry, Lock

DEB_CACHE_ENV = "ORCH_DEB_CACHE"
DEB_CACHE = Path("~/.cache/orchestrator/debs")


def cache_dir() -> Path:
    return Path(os.environ.get(DEB_CACHE_ENV) or DEB_CACHE).expanduser()


def unpacked_name(deb: DebEntry) -> str:
    """The cached tree of `deb`: its sha256 and, when members are omitted, their patterns."""
    return deb.sha256 + (f"-{digest_of(list(deb.omit))[:12]}" if deb.omit else "")


def _fail(what: str, stderr: str, where: Path) -> UserError:
    if is_no_space(stderr):
        return no_space(where)
    return UserError(f"{what} failed: {(stderr.strip().splitlines() or ['no output'])[-1]}")


def _check(path: Path, deb: DebEntry) -> None:
    got = sha256_file(path)
    if got != deb.sha256:
        path.unlink()
        raise UserError(f"lock mismatch: deb:{deb.name} {deb.filename} has sha256 {got}, the lock "
                        f"says {deb.sha256}; run `doit lock` if the archive changed")


def _download_pool(deb: DebEntry, dest: Path) -> None:
    """<mirror>/<pool>/<filename> into dest (a temp name in the cache)."""
    url = f"{mirror_uri()}/{deb.pool}/{deb.filename}"
    console.print(f"toolchain: fetching {deb.filename} ({deb.suite}) into the machine's deb cache")
    try:
        with requests.get(url, stream=True, timeout=60) as res:
            if res.status_code != 200:
                raise UserError(f"fetching deb:{deb.name} {deb.filename} from the {deb.suite} pool "
                                f"failed: HTTP {res.status_code}; run `doit lock` if it left the archive")
            with open(dest, "wb") as out:
                for chunk in res.iter_content(1 << 20):
                    out.write(chunk)
    except requests.RequestException as e:
        raise UserError(f"fetching deb:{deb.name} from the {deb.suite} pool failed: "
                        f"{type(e).__name__}; check the network and retry") from None
    except OSError as e:
        if is_no_space(e):
            raise no_space(dest) from None
        raise


def _download_apt(debs: list[DebEntry], cache: Path) -> None:
    """`apt-get download` (the machine's sources) of every deb not cached yet, in one call."""
    work = temp_in(cache, "apt-download")
    work.mkdir()
    try:
        res = subprocess.run(["apt-get", "download", "-q", *(f"{d.name}={d.version}" for d in debs)],
                             cwd=work, capture_output=True, text=True)
        if res.returncode != 0:
            raise _fail("downloading the locked Debian packages", res.stderr + res.stdout, work)
        for d in debs:
            files = sorted(work.glob(f"{d.name}_*_{d.arch}.deb"))
            if not files:
                raise UserError(f"apt-get download gave no file for {d.name}={d.version}")
            _check(files[0], d)
            os.replace(files[0], cache / d.filename)
    finally:
        remove_tree(work)


def _unpack(deb_file: Path, deb: DebEntry, dest: Path) -> None:
    """dpkg-deb's data tree of deb_file into dest, less the members `omit` names."""
    if not deb.omit:
        res = subprocess.run(["dpkg-deb", "-x", str(deb_file), str(dest)], capture_output=True, text=True)
    else:  # GNU tar's --exclude matches a pattern against every member's file name
        res = subprocess.run(["bash", "-o", "pipefail", "-c",
                              'dpkg-deb --fsys-tarfile "$0" | tar -x -C "$1" "${@:2}"', str(deb_file),
                              str(dest), *(f"--exclude={p}" for p in deb.omit)], capture_output=True, text=True)
    if res.returncode != 0:
        raise _fail(f"unpacking {deb.filename}", res.stderr, dest)


def cached_trees(debs: list[DebEntry]) -> list[Path]:
    """The unpacked tree of every deb, from the machine's cache: fetched and unpacked into it
    where missing (one process at a time per machine)."""
    cache = cache_dir()
    trees = cache / "unpacked"
    trees.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache / ".lock")):
        missing = [d for d in debs if not (trees / unpacked_name(d)).is_dir()]
        need = [d for d in missing if not (cache / d.filename).is_file()]
        from_apt = [d for d in need if d.pool is None]
        if from_apt:
            _download_apt(from_apt, cache)
        for d in need:
            if d.pool is not None:
                part = temp_in(cache, d.filename)
                try:
                    _download_pool(d, part)
                    _check(part, d)
                    os.replace(part, cache / d.filename)
                finally:
                    part.unlink(missing_ok=True)
        for d in missing:
            deb_file = cache / d.filename
            if d not in need:
                _check(deb_file, d)  # cached earlier: a file replaced since is caught here
            tmp = temp_in(trees, unpacked_name(d))
            tmp.mkdir()
            try:
                _unpack(deb_file, d, tmp)
                os.rename(tmp, trees / unpacked_name(d))
            except BaseException:
                remove_tree(tmp)
                raise
    return [trees / unpacked_name(d) for d in debs]


def install(debs_dir: Path, lock: Lock) -> Path | None:
    """Unpack every `deb:` entry of lock into <debs_dir>/root, or <debs_dir>/<tree> for one
    with a `tree`; returns <debs_dir>/root (None: the lock has no deb)."""
    debs = sorted((e for e in lock.entries.values() if isinstance(e, DebEntry)), key=lambda e: e.name)
    if not debs:
        return None
    roots: set[Path] = set()
    for deb, tree in zip(debs, cached_trees(debs), strict=True):
        root = debs_dir / (deb.tree or "root")
        roots.add(root)
        try:
            shutil.copytree(tree, root, symlinks=True, dirs_exist_ok=True)
        except OSError as e:
            if is_no_space(e) or is_no_space(str(e)):
                raise no_space(root) from None
            raise
    for root in roots:
        relativize_symlinks(root)
    main = debs_dir / "root"
    main.mkdir(parents=True, exist_ok=True)
    return main


def relativize_symlinks(root: Path) -> None:
    """Absolute links inside unpacked debs point at /usr/...; aim them inside the root."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if p.is_symlink():
                target = os.readlink(p)
                if os.path.isabs(target):
                    inside = root / target.lstrip("/")
                    if inside.exists() or inside.is_symlink():
                        p.unlink()
                        p.symlink_to(os.path.relpath(inside, p.parent))


def prefetch(locks_dir: Path, name: str) -> list[Path]:
    """Every deb of locks/<name>.lock.json into the machine's cache, fetched and unpacked
    (bootstrap.sh: the ~1 GB of CUDA 12.4 debs once per machine, not on each test run)."""
    from orchestrator.lock.files import load_lock

    lock = load_lock(locks_dir, name)
    return cached_trees([e for e in lock.entries.values() if isinstance(e, DebEntry)])


if __name__ == "__main__":  # python -m orchestrator.toolchain.deb_install <locks dir> <lock name>
    import sys

    trees = prefetch(Path(sys.argv[1]), sys.argv[2])
    console.print(f"{len(trees)} locked deb(s) of {sys.argv[2]} in {cache_dir()}")
