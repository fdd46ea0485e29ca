"""`doit pull`: fetch recipe/variant (or id=) from the substituters into the store; never builds."""
from __future__ import annotations

from typing import Any

from orchestrator.cache.cache_toml import load_config
from orchestrator.cache.errors import CacheError
from orchestrator.cache.pull import pull, transfer_summary
from orchestrator.cache.transfer import TransferStats
from orchestrator.config.settings import Settings
from orchestrator.console import console
from orchestrator.errors import UserError
from orchestrator.lock.files import load_lock
from orchestrator.plan.artifact_ref import named_artifact
from orchestrator.store.artifacts import Store
from orchestrator.toolchain.machine_check import check_interpreter
from orchestrator.toolchain.materialize import TOOLCHAIN_JSON, toolchain_root
from orchestrator.verbs.output import emit
from orchestrator.verbs.toolchain import toolchain_lock_name


def cmd_pull(settings: Settings) -> dict[str, Any]:
    """Fetch an artifact (or toolchain=1: the lock's toolchain) from the substituters into
    the store (nothing is built)."""
    store = Store(settings.store_root).ensure()
    store.clean_stale()
    if settings.flag("toolchain"):
        return pull_toolchain_verb(settings, store)
    artifact_id, name, found = named_artifact(settings, store)
    if found is not None:
        console.print(f"{found.name} is already in the store")
        result: dict[str, Any] = {"path": str(found), "origin": "present"}
        emit(settings, result)
        return result
    config = load_config(settings.repo_root)
    if not config.substituters:
        raise UserError("no substituters configured: add URLs to substituters in cache.toml "
                        "(or point ORCH_CACHE_CONFIG at another file)")
    stats = TransferStats()
    got = pull(store, artifact_id, config, stats=stats, quiet_misses=True)  # the error names them
    if got is None:
        raise CacheError(f"no substituter has {name}: "
                         f"{', '.join(config.substituters)}; build it with `doit build`")
    path, url = got
    console.print(f"pulled {path.name} from {url}: {transfer_summary(stats)}")
    result = {"path": str(path), "origin": url, "stats": stats.as_dict()}
    emit(settings, result)
    return result


def pull_toolchain_verb(settings: Settings, store: Store) -> dict[str, Any]:
    """The lock's toolchain from the substituters; exit 2 with one line when none delivers."""
    from orchestrator.cache.toolchain_pull import pull_toolchain

    name = toolchain_lock_name(settings)
    lock = load_lock(settings.locks_dir, name)
    check_interpreter(lock)
    final = toolchain_root(store, lock)
    config = load_config(settings.repo_root)
    if (final / TOOLCHAIN_JSON).is_file():
        console.print(f"toolchain {final.name} is already in the store")
        result: dict[str, Any] = {"path": str(final), "origin": "present"}
    else:
        if not config.substituters:
            raise UserError("no substituters configured: add URLs to substituters in cache.toml "
                            "(or point ORCH_CACHE_CONFIG at another file)")
        stats = TransferStats()
        with store.lock(f"toolchain-{final.name}"):
            url = pull_toolchain(store, lock, final, config, stats)
        if url is None:
            raise CacheError(f"no substituter has toolchain {final.name} (lock {name}): "
                             f"{', '.join(config.substituters)}; run `doit toolchain`")
        console.print(f"pulled toolchain {final.name} from {url}: {transfer_summary(stats)}")
        result = {"path": str(final), "origin": url, "stats": stats.as_dict()}
    emit(settings, result)
    return result
