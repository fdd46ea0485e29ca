"""Pinned archive sources and developer checkouts: obtain the tree, compute its identity.

A pinned source is a tarball checked by sha256, plus overlays (pinned tarballs placed at a
path inside the tree, e.g. an emptied submodule) and patches applied in order. Its identity
is computed from those inputs alone, so the unpacked tree (under `<store>/sources/`, made
once, beside its final place, then renamed) is never re-hashed.

A developer checkout (`source=PATH`) is identified cheaply: HEAD's commit, the hash of
`git diff HEAD` (git's index already caches file stats), and the untracked files, hashed
through the stat cache; dirty submodules recurse. A no-op run reads no file contents.
"""
from __future__ import annotations

from collections.abc import Sequence

import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any, Callable

from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from orchestrator.console import console
from orchestrator.errors import UserError
from orchestrator.hashing import StatCache, digest_of, sha256_bytes, sha256_file, tree_digest
from orchestrator.model.recipe import Recipe
from orchestrator.model.source_archive import Archive, ArchiveSource, Overlay
from orchestrator.settings import Settings
from orchestrator.source import IGNORED_DIRS, IGNORED_FILES, PREPARERS, PreparedSource, stat_cache
from orchestrator.store import Store, remove_tree
from orchestrator.workspace_links import is_workspace_link

ARCHIVES_ENV = "ORCH_ARCHIVES"
USER_ARCHIVES = Path("~/.cache/orchestrator/archives")
TREE_STAMP = ".orch-source.json"


# -- archives ---------------------------------------------------------------------------
def archive_dirs(store: Store) -> list[Path]:
    """Where archives are looked up by file name: $ORCH_ARCHIVES (':'-separated), the user's
    cache (~/.cache/orchestrator/archives, where .ci/pytorch-prereqs.sh puts them), the store."""
    dirs = [Path(d).expanduser() for d in os.environ.get(ARCHIVES_ENV, "").split(os.pathsep) if d]
    return [*dirs, USER_ARCHIVES.expanduser(), store.root / "archives"]


def _check_sha(path: Path, archive: Archive, cache: StatCache | None) -> None:
    found = cache.sha256(path) if cache else sha256_file(path)
    if found != archive.sha256:
        raise UserError(f"archive {path}: sha256 is {found}, the recipe pins {archive.sha256}; "
                        "delete the file or fix the recipe's sha256")


def _download(url: str, dest: Path) -> None:
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.part")
    try:
        with urllib.request.urlopen(url, timeout=60) as resp, open(tmp, "wb") as out:
            total = int(resp.headers.get("Content-Length") or 0) or None
            with Progress(TextColumn(f"[bold]fetch {dest.name}"), BarColumn(), DownloadColumn(),
                          TransferSpeedColumn(), console=console, transient=True) as prog:
                task = prog.add_task("", total=total)
                while chunk := resp.read(1 << 20):
                    out.write(chunk)
                    prog.update(task, advance=len(chunk))
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
    """`pip download --no-deps --no-binary :all: name==version` (the package index, then the sha)."""
    tmp = store.new_temp("pypi-sdist")
    try:
        res = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                              "--no-binary", ":all:", "--no-build-isolation", "-d", str(tmp), spec],
                             capture_output=True, text=True)
        got = tmp / archive.file
        if not got.is_file():
            found = ", ".join(p.name for p in tmp.iterdir()) or "nothing"
            last = (res.stderr.strip().splitlines() or ["no output"])[-1]
            raise UserError(f"source.fetch.pypi = {spec!r} gave {found}, not {archive.file} ({last}); "
                            "fix source.file or the pin")
        os.replace(got, dest_dir / archive.file)
    finally:
        remove_tree(tmp)


def obtain_archive(archive: Archive, store: Store, cache: StatCache | None = None) -> Path:
    """The archive's local path: found by name and sha256-checked, else fetched then checked."""
    for d in archive_dirs(store):
        p = d / archive.file
        if p.is_file():
            _check_sha(p, archive, cache)
            return p
    dest_dir = store.root / "archives"
    dest_dir.mkdir(parents=True, exist_ok=True)
    with store.lock(f"archive-{archive.sha256[:16]}"):
        dest = dest_dir / archive.file
        if not dest.is_file():
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
        try:
            _check_sha(dest, archive, cache)
        except UserError:
            dest.unlink()
            raise
    return dest


# -- pinned tree ------------------------------------------------------------------------
def patch_paths(spec: Any, recipes_dir: Path, recipe: str) -> list[Path]:
    """The spec's `patches` (relative to recipes/) as existing files, in order."""
    out = []
    for rel in spec.patches:
        p = (recipes_dir / rel).resolve()
        if not p.is_file():
            raise UserError(f"recipes/{recipe}.toml: source.patches names {rel!r}, "
                            f"which does not exist under recipes/; fix the path")
        out.append(p)
    return out


def archive_identity(spec: ArchiveSource, patches: list[Path]) -> dict[str, Any]:
    """Everything that decides the tree's content; patch order matters."""
    return {
        "kind": "archive",
        "sha256": spec.sha256,
        "strip_components": spec.strip_components,
        "overlays": [{"path": o.path, "sha256": o.sha256, "strip_components": o.strip_components,
                      **({"archive_dir": o.archive_dir} if o.archive_dir else {})}
                     for o in spec.overlays],
        "patches": patch_identity(patches),
    }


def patch_identity(patches: list[Path]) -> list[dict[str, str]]:
    return [{"name": p.name, "sha256": sha256_file(p)} for p in patches]


def _untar(archive: Path, dest: Path, strip: int, member: str | None = None) -> None:
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


def apply_patch(tree: Path, patch: Path, what: str = "the pinned source") -> None:
    res = subprocess.run(["patch", "-p1", "--batch", "--forward", "--fuzz=0", "--no-backup-if-mismatch",
                          "-d", str(tree), "-i", str(patch)], capture_output=True, text=True)
    if res.returncode != 0:
        detail = (res.stdout + res.stderr).strip().splitlines()[-1:] or ["no output"]
        raise UserError(f"patch {patch.name} does not apply to {what}: {detail[0]}; "
                        "refresh the patch against this source")


def _patched_mtimes(tree: Path, patch: Path) -> dict[Path, float]:
    """mtimes of the existing files a -p1 patch names (its `+++ ` lines)."""
    out: dict[Path, float] = {}
    for line in patch.read_text(errors="replace").splitlines():
        if line.startswith("+++ "):
            name = line[4:].split("\t")[0].strip()
            rel = name.split("/", 1)[1] if "/" in name else name
            f = tree / rel
            if f.is_file():
                out[f] = f.stat().st_mtime
    return out


def materialize(spec: ArchiveSource, patches: list[Path], identity: dict[str, Any],
                recipe: str, store: Store) -> Path:
    """Unpack archive + overlays + patches once into <store>/sources/<key>-<recipe>/."""
    key = digest_of(identity)[:16]
    final = store.root / "sources" / f"{key}-{recipe}"
    if (final / TREE_STAMP).is_file():
        return final
    cache = stat_cache(store)
    main = obtain_archive(spec, store, cache)
    overlays = [(o, obtain_archive(o, store, cache)) for o in spec.overlays]
    cache.save()
    with store.lock(f"source-{key}"):
        if (final / TREE_STAMP).is_file():
            return final
        with console.status(f"unpacking {spec.file}"), store.staging(f"source-{key}") as tmp:
            tree = tmp / "tree"
            _untar(main, tree, spec.strip_components)
            apply_overlays(tree, overlays, spec.file)
            for p in patches:
                apply_patch(tree, p)
            (tree / TREE_STAMP).write_text(digest_of(identity) + "\n")
            final.parent.mkdir(parents=True, exist_ok=True)
            if final.exists():  # a half-made tree cannot exist (rename); an old stampless one can
                remove_tree(final)
            os.rename(tree, final)
    return final


def apply_overlays(tree: Path, overlays: "Sequence[tuple[Overlay, Path]]", where: str) -> None:
    """Unpack each overlay at its path; it may only fill an empty or missing directory."""
    for o, path in overlays:
        dest = tree / o.path
        if dest.exists() and any(dest.iterdir()):
            raise UserError(f"overlay {o.file}: {o.path} is not empty in {where}; an "
                            "overlay may only fill an empty or missing directory")
        _untar(path, dest, o.strip_components, o.archive_dir)


def patched_copy(src: Path, patches: list[Path], identity: dict[str, Any], recipe: str,
                 store: Store, ignore: tuple[str, ...] | Callable = IGNORED_DIRS,
                 overlays: list[tuple[Overlay, Path]] = (), what: str = "the pinned source",
                 keep_mtimes: bool = False) -> Path:
    """A copy of src (less `ignore`d directories) with overlays (their directories must be
    empty or missing in src) and patches applied, made once into <store>/sources/<key>-<recipe>/.

    keep_mtimes: a patched file's mtime becomes the newer of its original's and the patch
    file's, so a fresh copy of an unchanged file (a developer checkout after an edit
    elsewhere) does not look changed to ninja/CMake."""
    key = digest_of(identity)[:16]
    final = store.root / "sources" / f"{key}-{recipe}"
    if (final / TREE_STAMP).is_file():
        return final
    with store.lock(f"source-{key}"):
        if (final / TREE_STAMP).is_file():
            return final
        with console.status(f"patching a copy of {src.name}"), store.staging(f"source-{key}") as tmp:
            tree = tmp / "tree"
            skip = ignore if callable(ignore) else shutil.ignore_patterns(*ignore)
            shutil.copytree(src, tree, symlinks=True, ignore=skip)
            apply_overlays(tree, overlays, str(src))
            for p in patches:
                before = _patched_mtimes(tree, p) if keep_mtimes else {}
                apply_patch(tree, p, what)
                for f, mtime in before.items():
                    if f.is_file():
                        newest = max(mtime, p.stat().st_mtime)
                        os.utime(f, (newest, newest))
            (tree / TREE_STAMP).write_text(digest_of(identity) + "\n")
            final.parent.mkdir(parents=True, exist_ok=True)
            if final.exists():
                remove_tree(final)
            os.rename(tree, final)
    return final


# -- developer checkout -----------------------------------------------------------------
def _git(path: Path, *args: str) -> bytes:
    res = subprocess.run(["git", "-c", f"safe.directory={path}", "-C", str(path), *args],
                         capture_output=True)
    if res.returncode != 0:
        raise UserError(f"git {' '.join(args[:2])} failed in {path}: "
                        f"{res.stderr.decode(errors='replace').strip()[-200:]}")
    return res.stdout


def is_git_checkout(path: Path) -> bool:
    res = subprocess.run(["git", "-c", f"safe.directory={path}", "-C", str(path), "rev-parse",
                          "--show-toplevel"], capture_output=True, text=True)
    return res.returncode == 0 and Path(res.stdout.strip()).resolve() == path.resolve()


def is_workspace_plumbing(rel: str) -> bool:
    """.orch/, .vscode/, compile_commands.json, ...: what switch/vscode write, never source."""
    parts = rel.split("/")
    return parts[0] in IGNORED_DIRS or (len(parts) == 1 and parts[0] in IGNORED_FILES)


def checkout_identity(path: Path, cache: StatCache) -> dict[str, Any]:
    """HEAD + diff hash + untracked files (stat-cached) + dirty submodules, recursively."""
    rev = _git(path, "rev-parse", "HEAD").decode().strip()
    # status refreshes git's index stat data, which makes the diff below cheap.
    status = _git(path, "status", "--porcelain=v2", "-z", "--untracked-files=all",
                  "--ignore-submodules=none").split(b"\0")
    untracked: list[list[str]] = []
    dirty_subs: dict[str, Any] = {}
    skip_next = False
    for rec in status:
        if skip_next:  # rename records carry the original path as the next field
            skip_next = False
            continue
        if not rec:
            continue
        text = rec.decode(errors="surrogateescape")
        if text.startswith("? "):
            rel = text[2:]
            f = path / rel
            if is_workspace_plumbing(rel) or is_workspace_link(f):
                continue
            if f.is_symlink():
                untracked.append([rel, "l", os.readlink(f)])
            elif f.is_file():
                untracked.append([rel, "x" if os.access(f, os.X_OK) else "f", cache.sha256(f)])
        elif text[:2] in ("1 ", "2 "):
            fields = text.split(" ")
            sub = fields[2]
            if text.startswith("2 "):
                skip_next = True
            if sub.startswith("S") and sub != "S...":
                rel = " ".join(fields[9 if text.startswith("2 ") else 8:])
                dirty_subs[rel] = checkout_identity(path / rel, cache)
    diff = _git(path, "diff", "HEAD", "--binary", "--no-ext-diff", "--no-textconv",
                "--ignore-submodules=all")
    return {
        "kind": "git-checkout",
        "rev": rev,
        "diff_sha256": sha256_bytes(diff),
        "untracked_sha256": digest_of(sorted(untracked)),
        "dirty_submodules": dirty_subs,
    }


def checkout_dir(raw: str) -> Path:
    src = Path(raw).expanduser()
    src = (src if src.is_absolute() else Path.cwd() / src).resolve()
    if not src.is_dir():
        raise UserError(f"source={raw}: directory {src} does not exist; fix the path")
    return src


def prepare_checkout(raw: str, store: Store) -> PreparedSource:
    """A developer's own tree given as source=PATH (git-aware identity; dirty trees allowed)."""
    src = checkout_dir(raw)
    cache = stat_cache(store)
    if is_git_checkout(src):
        ident = checkout_identity(src, cache)
    else:
        ident = {"kind": "path", "tree_sha256": tree_digest(src, cache, IGNORED_DIRS)}
    cache.save()
    extra = {"checkout": True, "git_rev": ident.get("rev")}
    return PreparedSource(dir=src, identity=ident, extra=extra)


def prepare_archive_source(settings: Settings, recipe: Recipe, spec: ArchiveSource,
                           store: Store) -> PreparedSource:
    """source=PATH builds that checkout; otherwise the recipe's pinned archive."""
    raw = settings.vars.get("source")
    if raw:
        if recipe.build.system == "pytorch":  # an unsupported tree: one line, before any work
            from orchestrator.builders.pytorch import tree_version
            tree_version(checkout_dir(raw), f"source={raw}")
        prepared = prepare_checkout(raw, store)
        if spec.patch_checkouts and (spec.overlays or spec.patches):
            return patched_checkout(settings, recipe, spec, prepared, store)
        return prepared
    patches = patch_paths(spec, settings.recipes_dir, recipe.name)
    identity = archive_identity(spec, patches)
    tree = materialize(spec, patches, identity, recipe.name, store)
    return PreparedSource(dir=tree, identity=identity, extra={"checkout": False})


def checkout_ignore(root: Path) -> Callable[[str, list[str]], set[str]]:
    """What a checkout's copy leaves out: workspace plumbing and build output at the root
    (.orch, .vscode, build, ... as the identity does), VCS data, __pycache__ and the
    workspace's links into .orch/profile anywhere (a submodule's `.git` file would point
    outside the copy). A nested directory named `build`
    (PyTorch has tools/build/) is source and is copied."""
    def skip(d: str, names: list[str]) -> set[str]:
        top = Path(d) == root
        return {n for n in names if n in (".git", ".hg", "__pycache__")
                or (top and is_workspace_plumbing(n)) or is_workspace_link(Path(d) / n)}
    return skip


def patched_checkout(settings: Settings, recipe: Recipe, spec: ArchiveSource,
                     prepared: PreparedSource, store: Store) -> PreparedSource:
    """`patch_checkouts = true`: the recipe's overlays (only where the checkout's directory is
    empty or missing: a checkout with its submodules keeps them) and patches, applied to a
    copy under the store; the checkout itself is never written. Identity = the checkout's +
    the overlays used + the patches (in order)."""
    src = prepared.dir
    patches = patch_paths(spec, settings.recipes_dir, recipe.name)
    wanted = [o for o in spec.overlays
              if not ((src / o.path).is_dir() and any((src / o.path).iterdir()))]
    identity = {**prepared.identity,
                "overlays": archive_identity(spec.model_copy(update={"overlays": wanted}),
                                             [])["overlays"],
                "patches": patch_identity(patches)}
    cache = stat_cache(store)
    overlays = [(o, obtain_archive(o, store, cache)) for o in wanted]
    cache.save()
    tree = patched_copy(src, patches, identity, recipe.name, store, ignore=checkout_ignore(src),
                        overlays=overlays,
                        what=f"the checkout {src}", keep_mtimes=True)
    # One incremental build tree per checkout and recipe-side inputs: the copy keeps mtimes,
    # so an overlay bumped to files with older mtimes must not reuse objects built before.
    build_key = f"{src}\0{digest_of([identity['overlays'], identity['patches']])}"
    return PreparedSource(dir=tree, identity=identity,
                          extra={**prepared.extra, "patched_copy": True, "checkout_dir": str(src),
                                 "build_key": build_key})


def register() -> None:
    PREPARERS["archive"] = prepare_archive_source


register()

__all__ = ["obtain_archive", "materialize", "checkout_identity", "prepare_checkout",
           "prepare_archive_source", "archive_identity", "patched_checkout"]
