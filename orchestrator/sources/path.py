"""`kind = "path"` sources: a directory of the repository (or source=PATH), hashed whole
through the stat cache; with patches, a patched copy under the store is built instead."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.config.settings import Settings
from orchestrator.errors import UserError
from orchestrator.hashing import tree_items
from orchestrator.memo.file_reads import recorded
from orchestrator.model.recipe import PathSource, Recipe
from orchestrator.sources.listing import keep_listing
from orchestrator.sources.patches import patch_identity, patch_paths, patched_copy
from orchestrator.sources.prepared import IGNORED_DIRS, IGNORED_FILES, PreparedSource, stat_cache
from orchestrator.store.artifacts import Store


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
    # A plan memo computes it again (through the stat cache) instead of noting the files.
    digest = recorded("tree", [str(src), list(IGNORED_DIRS), list(IGNORED_FILES)],
                      lambda: keep_listing(store.root, tree_items(src, cache, IGNORED_DIRS,
                                                                  IGNORED_FILES)))
    cache.save()
    identity: dict[str, Any] = {"kind": "path", "tree_sha256": digest}
    if spec.patches:  # a patched copy under the store; the directory itself stays as it is
        patches = patch_paths(spec, settings.recipes_dir, recipe.name)
        identity["patches"] = patch_identity(patches)
        return PreparedSource(dir=patched_copy(src, patches, identity, recipe.name, store),
                              identity=identity)
    return PreparedSource(dir=src, identity=identity)
