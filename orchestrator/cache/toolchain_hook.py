"""The toolchain substituter ensure_toolchain is given (realise, `doit toolchain`).

Kept import-light: the cache's modules load only when a toolchain is actually missing, so a
build whose toolchain is present pays nothing for the hook.
"""
from __future__ import annotations

from pathlib import Path

from orchestrator.config.settings import Settings
from orchestrator.model.lock import Lock
from orchestrator.store.artifacts import Store
from orchestrator.toolchain.materialize import Substituter


def toolchain_substituter(settings: Settings) -> Substituter | None:
    """None with substitute=0; else a substituter asking cache.toml's substituters."""
    if not settings.substitute:
        return None

    def substitute(store: Store, lock: Lock, final: Path) -> str | None:
        from orchestrator.cache.toolchain_pull import substitute_toolchain  # only when missing
        return substitute_toolchain(settings.repo_root, store, lock, final)

    return substitute
