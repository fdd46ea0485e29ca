"""Obtain a recipe's source directory and compute its identity (what the id hashes)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from orchestrator.errors import UserError
from orchestrator.hashing import StatCache, tree_digest
from orchestrator.model.recipe import PathSource, Recipe
from orchestrator.settings import Settings
from orchestrator.store import Store

# Never part of a source's identity: VCS metadata and build output left in the tree.
IGNORED_DIRS = (".git", ".hg", "build", "__pycache__", ".orch", ".vscode", ".cache")
# Files `doit vscode` / `doit switch` write at a source root (CMake reads presets only there).
IGNORED_FILES = ("CMakePresets.json", ".lldbinit", ".gdbinit", "compile_commands.json")


@dataclass
class PreparedSource:
    dir: Path
    identity: dict[str, Any]
    # Recorded for debuggers: the logical root debug info uses for this source.
    extra: dict[str, Any] = field(default_factory=dict)


def stat_cache(store: Store) -> StatCache:
    return StatCache(store.root / "cache" / "stat-cache.json")


def prepare_path_source(settings: Settings, recipe: Recipe, spec: PathSource,
                        store: Store) -> PreparedSource:
    raw = settings.vars.get("source") or spec.path
    base = Path(raw).expanduser()
    src = base if base.is_absolute() else (
        (Path.cwd() / base) if "source" in settings.vars else settings.recipes_dir / base)
    src = src.resolve()
    if not src.is_dir():
        where = "source=" + raw if "source" in settings.vars else f"recipes/{recipe.name}.toml: source.path"
        raise UserError(f"{where}: source directory {src} does not exist; fix the path")
    cache = stat_cache(store)
    digest = tree_digest(src, cache, IGNORED_DIRS, IGNORED_FILES)
    cache.save()
    identity: dict[str, Any] = {"kind": "path", "tree_sha256": digest}
    if spec.patches:  # a patched copy under the store; the directory itself stays as it is
        from orchestrator.source_archive import patch_identity, patch_paths, patched_copy
        patches = patch_paths(spec, settings.recipes_dir, recipe.name)
        identity["patches"] = patch_identity(patches)
        return PreparedSource(dir=patched_copy(src, patches, identity, recipe.name, store),
                              identity=identity)
    return PreparedSource(dir=src, identity=identity)


# Source kinds other modules add (e.g. tarballs with overlays and patches) register here.
PREPARERS: dict[str, Callable[[Settings, Recipe, Any, Store], PreparedSource]] = {
    "path": prepare_path_source,
}


def with_subdir(recipe: Recipe, prepared: PreparedSource) -> PreparedSource:
    """source.subdir: build that directory of the prepared tree (recorded in the identity)."""
    sub = recipe.source.subdir
    if sub is None:
        return prepared
    d = prepared.dir / sub
    if not d.is_dir():
        raise UserError(f"recipes/{recipe.name}.toml: source.subdir {sub!r} does not exist in the "
                        f"source ({prepared.dir}); fix source.subdir")
    return PreparedSource(dir=d, identity={**prepared.identity, "subdir": sub}, extra=prepared.extra)


def prepare_source(settings: Settings, recipe: Recipe, store: Store) -> PreparedSource:
    kind = recipe.source.kind
    if kind == "archive":
        import orchestrator.source_archive  # noqa: F401  (registers its preparer)
    if kind == "git":
        import orchestrator.source_git  # noqa: F401  (registers its preparer)
    if kind not in PREPARERS:
        raise UserError(f"recipes/{recipe.name}.toml: source.kind {kind!r} is not supported")
    return with_subdir(recipe, PREPARERS[kind](settings, recipe, recipe.source, store))
