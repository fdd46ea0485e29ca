"""Pinned archive files: found by name (and sha256-checked), else fetched once into the store.

Looked up in $ORCH_ARCHIVES, the user's cache and <store>/archives; fetched by URL, by
`apt-get source --download-only` or as an sdist from the package index (pypi_sdist.py), as
the recipe says.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from rich.markup import escape

from orchestrator.console import ByteProgress, console
from orchestrator.errors import UserError
from orchestrator.fs import remove_tree, temp_sibling
from orchestrator.hashing import StatCache, sha256_file
from orchestrator.model.source_archive import Archive
from orchestrator.store.artifacts import Store

ARCHIVES_ENV = "ORCH_ARCHIVES"
USER_ARCHIVES = Path("~/.cache/orchestrator/archives")


def archive_dirs(store: Store) -> list[Path]:
    """Where archives are looked up by file name: $ORCH_ARCHIVES (':'-separated), the user's
    cache (~/.cache/orchestrator/archives, where .ci/pytorch-prereqs.sh puts them), the store."""
    dirs = [Path(d).expanduser() for d in os.environ.get(ARCHIVES_ENV, "").split(os.pathsep) if d]
    return [*dirs, USER_ARCHIVES.expanduser(), store.paths.archives]


def check_pinned_digest(path: Path, archive: Archive, cache: StatCache | None) -> None:
    found = cache.sha256(path) if cache else sha256_file(path)
    if found != archive.sha256:
        raise UserError(f"archive {path}: sha256 is {found}, the recipe pins {archive.sha256}; "
                        "delete the file or fix the recipe's sha256")


def _download(url: str, dest: Path) -> None:
    import urllib.request  # here: its http/ssl imports would slow every command's start

    tmp = temp_sibling(dest)
    try:
        with urllib.request.urlopen(url, timeout=60) as resp, open(tmp, "wb") as out:
            total = int(resp.headers.get("Content-Length") or 0) or None
            with ByteProgress(f"[bold]fetch {escape(dest.name)}", total) as bar:
                while chunk := resp.read(1 << 20):
                    out.write(chunk)
                    bar.advance(len(chunk))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, dest)
    except OSError as e:
        raise UserError(f"fetching {dest.name} failed: {e}; put the file in ${ARCHIVES_ENV}") from None
    finally:
        tmp.unlink(missing_ok=True)


def _apt_source(spec: str, archive: Archive, dest_dir: Path, store: Store) -> None:
    """`apt-get source --download-only`; a failure on other files of the package is fine."""
    tmp = store.new_temp("apt-source")
    try:
        res = subprocess.run(["apt-get", "source", "--download-only", "-q", spec], cwd=tmp,
                             capture_output=True, text=True)
        got = tmp / archive.file
        if not got.is_file():
            last = (res.stderr.strip().splitlines() or ["no output"])[-1]
            raise UserError(f"apt-get source {spec} did not fetch {archive.file} ({last}); "
                            f"run .ci/pytorch-prereqs.sh or put the file in ${ARCHIVES_ENV}")
        os.replace(got, dest_dir / archive.file)
    finally:
        remove_tree(tmp)


def _pypi_sdist(spec: str, archive: Archive, dest_dir: Path, store: Store) -> None:
    """The sdist from the package index, no build (sources.pypi_sdist); the caller checks its sha."""
    from orchestrator.sources.pypi_sdist import SdistNotFetched, download_sdist

    tmp = store.new_temp("pypi-sdist")
    try:
        with console.status(f"fetch {escape(spec)} (sdist)"):
            try:
                got = download_sdist(spec, tmp)
            except SdistNotFetched as e:
                raise UserError(f"source.fetch.pypi = {spec!r} failed: {e}; check the name and "
                                "version and pip's index settings (pip.conf, PIP_INDEX_URL, "
                                f"PIP_FIND_LINKS), or put {archive.file} in ${ARCHIVES_ENV}") from None
        if got.name != archive.file:
            raise UserError(f"source.fetch.pypi = {spec!r} is the sdist {got.name}, not "
                            f"source.file = {archive.file!r}; set source.file = {got.name!r}")
        os.replace(got, dest_dir / archive.file)
    finally:
        remove_tree(tmp)


def obtain_archive(archive: Archive, store: Store, cache: StatCache | None = None) -> Path:
    """The archive's local path: found by name and sha256-checked, else fetched then checked."""
    for d in archive_dirs(store):
        p = d / archive.file
        if p.is_file():
            check_pinned_digest(p, archive, cache)
            return p
    return fetch_into(archive, store.paths.archives, store, cache)


def fetch_into(archive: Archive, dest_dir: Path, store: Store,
               cache: StatCache | None = None) -> Path:
    """Fetch the archive as its recipe says into dest_dir (unless already there), sha-checked;
    `store` gives the lock and the temp space."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    with store.lock(f"archive-{archive.sha256[:16]}"):
        dest = dest_dir / archive.file
        fetched = not dest.is_file()
        if fetched:
            if archive.fetch.url:
                _download(archive.fetch.url, dest)
            elif archive.fetch.apt_source:
                _apt_source(archive.fetch.apt_source, archive, dest_dir, store)
            elif archive.fetch.pypi:
                _pypi_sdist(archive.fetch.pypi, archive, dest_dir, store)
            else:
                looked = ", ".join(str(d) for d in archive_dirs(store))
                raise UserError(f"archive {archive.file} not found (looked in {looked}) and the "
                                "recipe gives no fetch; put it in one of those directories or add "
                                f"yours to ${ARCHIVES_ENV} (':'-separated)")
        if not fetched:
            try:
                check_pinned_digest(dest, archive, cache)
            except UserError:
                dest.unlink()
                raise
            return dest
        found = sha256_file(dest)
        if found != archive.sha256:
            dest.unlink()
            raise UserError(f"{archive.file} as fetched has sha256 {found}, the recipe pins "
                            f"{archive.sha256} (the file was not kept); if it is the file you "
                            "mean (compare with the digest the index or the publisher shows), "
                            f"set sha256 = \"{found}\"")
    return dest


def untar(archive: Path, dest: Path, strip: int, member: str | None = None) -> None:
    """Unpack the archive (or only its directory `member`, whose contents land in dest)."""
    dest.mkdir(parents=True, exist_ok=True)
    select = [] if member is None else [member]
    if member is not None:
        strip = len(member.split("/"))
    res = subprocess.run(["tar", "-xf", str(archive), "-C", str(dest), "--no-same-owner",
                          f"--strip-components={strip}", *select], capture_output=True, text=True)
    if res.returncode != 0:
        raise UserError(f"unpacking {archive} failed: {res.stderr.strip()[-300:]}")
    if member is not None and not any(dest.iterdir()):
        raise UserError(f"{archive.name} has no directory {member!r}; fix the overlay's archive_dir")
