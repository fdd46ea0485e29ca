"""What a store holds and what of it is still needed: sizes (each inode counted once),
toolchains, build trees, sources, archives, and the plan `doit gc` carries out.

Needed = a profile generation within `keep` of a registered workspace (artifacts); a
toolchain one of locks/*.lock.json pins or a workspace's `.orch/toolchain` points at;
a build tree of a recipe's existing variant; a git source the git lock pins; the newest
unpacked source of each recipe; an archive (or git cache) a recipe names. Everything else
can be rebuilt or fetched again and is what gc removes."""
from __future__ import annotations

import datetime as dt
import os
import re
import stat
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.config.settings import Settings
from orchestrator.errors import UserError
from orchestrator.fs import is_stale_temp, remove_tree
from orchestrator.memo.plan_memo import memo_artifact
from orchestrator.store.artifacts import Store


def _files(path: Path) -> Iterator[os.stat_result]:
    """lstat of every entry under path (path itself included; links not followed)."""
    try:
        st = path.lstat()
    except OSError:
        return
    yield st
    if not path.is_dir() or path.is_symlink():
        return
    for dirpath, dirnames, filenames in os.walk(path):
        for n in dirnames + filenames:
            try:
                yield os.lstat(os.path.join(dirpath, n))
            except OSError:
                pass


def tree_size(path: Path) -> int:
    """Bytes under path, each inode once (hard links in the dedupe pool are shared)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for st in _files(path):
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_size
    return total


def freed_bytes(paths: Iterable[Path]) -> int:
    """Bytes deleting paths frees: an inode counts when no link outside them (other than
    its dedupe-pool entry, which gc prunes then) remains."""
    occurrences: Counter[tuple[int, int]] = Counter()
    stats: dict[tuple[int, int], os.stat_result] = {}
    for p in paths:
        for st in _files(p):
            key = (st.st_dev, st.st_ino)
            occurrences[key] += 1
            stats[key] = st
    return sum(st.st_size for key, st in stats.items()
               if stat.S_ISDIR(st.st_mode) or st.st_nlink - occurrences[key] <= 1)


def mtime_iso(path: Path) -> str | None:
    try:
        t = path.lstat().st_mtime
    except OSError:
        return None
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M")


def source_revision(derivation: dict[str, Any]) -> str:
    """A short name for the source an artifact was built from: `git 1a2b3c4d5e6f`."""
    src = derivation.get("source") or {}
    for key in ("commit", "head", "tree", "tree_sha256", "sha256", "digest"):
        if isinstance(src.get(key), str):
            return f"{src.get('kind', '?')} {src[key][:12]}"
    return str(src.get("kind", "?"))


# -- what is needed --------------------------------------------------------------------------
@dataclass
class Needed:
    artifacts: set[Path]
    toolchains: set[str] | None      # names under toolchains/; None: unknown (keep all)
    variants: dict[str, set[str] | None]  # recipe -> variants (None: recipe unreadable)
    git_trees: set[str]
    archives: set[str]
    git_urls: set[str]
    notes: list[str]
    kept_by: dict[Path, list[str]] = field(default_factory=dict)  # artifact -> the roots keeping it
    sources: set[str] = field(default_factory=set)  # source trees a workspace's debuggers map to


def _workspaces(store: Store) -> list[Path]:
    out = []
    for link in sorted(store.gcroots_dir.iterdir()) if store.gcroots_dir.is_dir() else []:
        if link.is_symlink() and Path(os.readlink(link)).is_dir():
            out.append(Path(os.readlink(link)).parent)
    return out


def _mapped_sources(ws_root: Path, sources_dir: Path) -> set[str]:
    """The store's source trees a workspace's debuggers map to (launch.json: lldb's sourceMap,
    gdb's sourceFileMap): without one a debugger there shows no source and binds no line."""
    from orchestrator.ide.jsonc import read_json

    try:
        launch = read_json(ws_root / ".vscode" / "launch.json")
    except (UserError, OSError, ValueError):
        return set()
    targets: list[Any] = []
    for c in launch.get("configurations", []):
        if isinstance(c, dict):
            targets += [p[1] for p in c.get("sourceMap", []) if isinstance(p, list) and len(p) == 2]
            if isinstance(c.get("sourceFileMap"), dict):
                targets += list(c["sourceFileMap"].values())
    return {Path(t).name for t in targets if isinstance(t, str) and Path(t).parent == sources_dir}


def needed(settings: Settings, store: Store, keep: int) -> Needed:
    from orchestrator.lock.files import load_lock
    from orchestrator.model.recipe import load_recipe
    from orchestrator.toolchain.materialize import toolchain_hash
    from orchestrator.workspace.profiles import Workspace

    notes: list[str] = []
    arts: set[Path] = set()
    kept_by: dict[Path, list[str]] = {}
    tcs: set[str] | None = set()
    sources: set[str] = set()
    for ws_root in _workspaces(store):
        sources |= _mapped_sources(ws_root, store.paths.sources)
        ws = Workspace(ws_root)
        gens = ws.generations()
        kept = sorted(gens)[-keep:] if keep > 0 else []
        cur = ws.current_generation()
        kept += [cur] if cur is not None else []
        arts |= {Path(os.path.realpath(gens[g])) for g in kept if g in gens}
        for g in sorted(set(kept) & set(gens)):
            root = f"{ws_root} generation {g}{' (active)' if g == cur else ''}"
            kept_by.setdefault(Path(os.path.realpath(gens[g])), []).append(root)
        if ws.toolchain_link.is_symlink():
            tcs.add(Path(os.readlink(ws.toolchain_link)).name)
    for lock_file in sorted(settings.locks_dir.glob("*.lock.json")):
        name = lock_file.name[: -len(".lock.json")]
        try:
            tcs.add(toolchain_hash(load_lock(settings.locks_dir, name)))
        except (UserError, ValueError, OSError) as e:
            notes.append(f"toolchains kept: lock {name} unreadable ({str(e)[:80]})")
            tcs = None
            break
    variants: dict[str, set[str] | None] = {}
    archives: set[str] = set()
    urls: set[str] = set()
    for path in sorted(settings.recipes_dir.glob("*.toml")):
        try:
            recipe = load_recipe(settings.recipes_dir, path.stem)
        except (UserError, ValueError, OSError):
            variants[path.stem] = None
            notes.append(f"kept: everything of recipe {path.stem} (it does not load)")
            continue
        variants[recipe.name] = set(recipe.variants)
        src = recipe.source
        for a in [src, *getattr(src, "overlays", [])]:
            if isinstance(getattr(a, "file", None), str):
                archives.add(a.file)
        if isinstance(getattr(src, "url", None), str):
            urls.add(src.url)
    trees: set[str] = set()
    git_lock = settings.locks_dir / "git-sources.json"
    if git_lock.is_file():
        import json
        try:
            for entry in json.loads(git_lock.read_text()).values():
                if isinstance(entry, dict):
                    trees.add(str(entry.get("tree", ""))[:16])
                    urls.add(str(entry.get("url", "")))
        except (ValueError, AttributeError):
            notes.append("kept: every git source (locks/git-sources.json does not parse)")
            trees = {"*"}
    return Needed(arts, tcs, variants, trees, archives, urls, notes, kept_by, sources)


# -- the gc plan ------------------------------------------------------------------------------
@dataclass
class Doomed:
    kind: str   # artifact | toolchain | toolchain check copy | plan memo | build tree | source | archive |
    # git cache | runtime install | failed build | staged step output
    path: Path
    why: str


_BUILD_KEY = re.compile(r"-[0-9a-f]{8}$")


def _build_tree_needed(name: str, variants: dict[str, set[str] | None]) -> bool:
    base = _BUILD_KEY.sub("", name)
    for recipe, vs in variants.items():
        if base.startswith(recipe + "-"):
            if vs is None or base[len(recipe) + 1:] in vs:
                return True
    return False


def _listdir(d: Path) -> list[Path]:
    return sorted(d.iterdir()) if d.is_dir() else []


def gc_plan(settings: Settings, store: Store, keep: int,
            need: Needed | None = None) -> tuple[list[Doomed], list[str]]:
    """Everything gc would delete, each with why; and notes on what it kept to be safe."""
    from orchestrator.hashing import digest_of

    need = need or needed(settings, store, keep)
    out: list[Doomed] = []
    for art in store.artifacts():
        if Path(os.path.realpath(art)) not in need.artifacts:
            out.append(Doomed("artifact", art, f"no generation within keep={keep}"))
    if need.toolchains is not None:
        out += [Doomed("toolchain", p, "no lock or workspace uses it")
                for p in _listdir(store.toolchains_dir)
                if p.name not in need.toolchains and not p.name.startswith(".")]
    doomed_tcs = {d.path.name for d in out if d.kind == "toolchain"}
    out += [Doomed("toolchain check copy", p, "its toolchain is gone")  # tree_manifest.read_quick
            for p in _listdir(store.paths.toolchain_quick)
            if (name := p.name.removeprefix("quick-").removesuffix(".marshal")) in doomed_tcs
            or not (store.toolchains_dir / name).exists()]
    doomed_arts = {str(d.path) for d in out if d.kind == "artifact"}
    out += [Doomed("plan memo", p, "its artifact is gone")  # plan_memo.py
            for p in _listdir(store.paths.memos)
            if (art := memo_artifact(p)) is None or art in doomed_arts or not Path(art).is_dir()]
    out += [Doomed("build tree", p, "its recipe or variant is gone")
            for p in _listdir(store.build_dir) if not _build_tree_needed(p.name, need.variants)]
    newest: dict[str, Path] = {}
    for p in _listdir(store.paths.sources):
        if p.name.startswith("git-"):
            if "*" not in need.git_trees and p.name[4:20] not in need.git_trees:
                out.append(Doomed("source", p, "no recipe's git lock pins its tree"))
            continue
        recipe = next((r for r in need.variants if p.name.endswith("-" + r)), None)
        if recipe is None:
            out.append(Doomed("source", p, "its recipe is gone"))
        elif recipe not in newest or p.lstat().st_mtime > newest[recipe].lstat().st_mtime:
            if recipe in newest and newest[recipe].name not in need.sources:
                out.append(Doomed("source", newest[recipe], "an older unpacked source"))
            newest[recipe] = p
        elif p.name not in need.sources:  # a workspace's debuggers show that tree: kept
            out.append(Doomed("source", p, "an older unpacked source"))
    out += [Doomed("archive", p, "no recipe names it")
            for p in _listdir(store.paths.archives) if p.name not in need.archives
            and not p.name.startswith(".")]
    urls = {digest_of(u)[:16] for u in need.git_urls if u}
    out += [Doomed("git cache", p, "no recipe or lock names its URL")
            for p in _listdir(store.paths.git) if p.name.removesuffix(".git") not in urls]
    out += [Doomed("runtime install", p, "a cached install of runtime pins (each artifact has "
                   "its own copy; a build makes it again)")
            for p in _listdir(store.paths.runtime_installs) if re.fullmatch(r"[0-9a-f]{32}", p.name)]
    out += [Doomed("runtime install", p, "left by a killed build or gc")  # temps of dead pids
            for p in _listdir(store.paths.runtime_installs) if is_stale_temp(p.name)]
    out += [Doomed("failed build", p, "kept for inspection until the next gc")
            for p in sorted(store.tmp_dir.glob("failed-*")) if store.tmp_dir.is_dir()]
    out += [Doomed("staged step output", p, "left between doit's step tasks (realise/steps.py); "
                   "its step-build task makes it again")
            for p in sorted(store.tmp_dir.glob("staged-*")) if store.tmp_dir.is_dir()]
    return out, need.notes


def _drop_runtime_install(store: Store, path: Path) -> None:
    """Unless a build holds it (making or copying it): renamed away whole, then removed, so
    no half-removed install is ever taken for a whole one."""
    from filelock import Timeout

    from orchestrator.builders.runtime_site import cache_lock_name
    from orchestrator.fs import temp_in

    if is_stale_temp(path.name):  # its owner is gone: nobody else names it
        remove_tree(path)
        return
    try:
        with store.lock(cache_lock_name(path.name), timeout=0):
            if not path.is_dir():
                return
            gone = temp_in(path.parent, "." + path.name)
            os.rename(path, gone)
    except Timeout:
        return  # a build uses it now: the next gc
    remove_tree(gone)


def apply(store: Store, doomed: list[Doomed]) -> None:
    """Delete the plan's entries (artifacts leave store/ atomically first), then the pool."""
    with store.lock("gc"):
        store.clean_stale()
        for d in doomed:
            if d.kind == "artifact":
                if d.path.is_dir():
                    store.delete_artifact(d.path)
            elif d.kind == "runtime install":
                _drop_runtime_install(store, d.path)
            elif d.path.is_symlink():
                d.path.unlink()
            elif d.path.exists():
                remove_tree(d.path)
        store.prune_links()
