"""Obtain a recipe's source directory and compute its identity (what the id hashes)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrator.config.settings import Settings
from orchestrator.errors import UserError
from orchestrator.model.recipe import Recipe
from orchestrator.sources.archive import prepare_archive_source
from orchestrator.sources.git import prepare_git_source
from orchestrator.sources.path import prepare_path_source
from orchestrator.sources.prepared import PreparedSource
from orchestrator.store.artifacts import Store

# source.kind → the function that prepares it (a new kind: a module and a row here).
PREPARERS: dict[str, Callable[[Settings, Recipe, Any, Store], PreparedSource]] = {
    "path": prepare_path_source,
    "archive": prepare_archive_source,
    "git": prepare_git_source,
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
    if kind not in PREPARERS:
        raise UserError(f"recipes/{recipe.name}.toml: source.kind {kind!r} is not supported")
    return with_subdir(recipe, PREPARERS[kind](settings, recipe, recipe.source, store))
