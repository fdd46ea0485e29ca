"""`doit toolchain`: materialize the recipe's lock (or lock=NAME) into <store>/toolchains/."""
from __future__ import annotations

from orchestrator.lock.files import load_lock
from orchestrator.model.recipe import load_recipe
from orchestrator.settings import Settings
from orchestrator.store import Store
from orchestrator.toolchain import ensure_toolchain
from orchestrator.verbs.output import emit


def cmd_toolchain(settings: Settings) -> None:
    name = settings.vars.get("lock") or load_recipe(settings.recipes_dir, settings.recipe).lock
    tc = ensure_toolchain(Store(settings.store_root), load_lock(settings.locks_dir, name))
    emit(settings, {"toolchain": str(tc.root), "lock": name}, f"toolchain {name}: {tc.root}")
