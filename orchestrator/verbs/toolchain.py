"""`doit toolchain`: materialize the recipe's lock (or lock=NAME) into <store>/toolchains/,
pulled from the substituters when one has a trusted copy (substitute=0: build it here)."""
from __future__ import annotations

from orchestrator.cache.toolchain_hook import toolchain_substituter
from orchestrator.config.settings import Settings
from orchestrator.lock.files import load_lock
from orchestrator.model.recipe import load_recipe
from orchestrator.store.artifacts import Store
from orchestrator.toolchain.materialize import ensure_toolchain
from orchestrator.verbs.output import emit


def toolchain_lock_name(settings: Settings) -> str:
    """lock=NAME, else the lock of recipe= (default demo)."""
    return settings.vars.get("lock") or load_recipe(settings.recipes_dir, settings.recipe).lock


def cmd_toolchain(settings: Settings) -> None:
    name = toolchain_lock_name(settings)
    tc = ensure_toolchain(Store(settings.store_root), load_lock(settings.locks_dir, name),
                          toolchain_substituter(settings))
    emit(settings, {"toolchain": str(tc.root), "lock": name}, f"toolchain {name}: {tc.root}")
