"""`doit push`: upload recipe/variant (or id=, or all=1: every stored artifact of the recipe)
to the cache, signed."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.cache.cache_toml import CacheConfig, load_config
from orchestrator.cache.push import push_many
from orchestrator.cache.signing import SecretKey, load_signing_key
from orchestrator.cache.transfer import TransferStats
from orchestrator.config.settings import Settings
from orchestrator.console import console
from orchestrator.errors import UserError
from orchestrator.lock.files import load_lock
from orchestrator.plan.artifact_ref import named_artifact
from orchestrator.store.artifacts import Store
from orchestrator.toolchain.materialize import TOOLCHAIN_JSON, toolchain_root
from orchestrator.verbs.output import emit
from orchestrator.verbs.toolchain import toolchain_lock_name


def chosen_artifacts(settings: Settings, store: Store) -> list[Path]:
    """What push uploads: all=1 → the recipe's stored artifacts; else the one named."""
    if settings.flag("all"):
        artifacts = [a for a in store.artifacts()
                     if Store.read_manifest(a).recipe == settings.recipe]
        if not artifacts:
            raise UserError(f"no artifacts of recipe {settings.recipe!r} in {store.root}; "
                            "build some first")
        return artifacts
    _, name, found = named_artifact(settings, store)
    if found is None:
        raise UserError(f"{name} is not in {store.root}; run `doit build` (or pull) first")
    return [found]


def cmd_push(settings: Settings) -> dict[str, Any]:
    """Upload one artifact (recipe+variant or id=), all=1 artifacts of a recipe, or
    toolchain=1: the materialized toolchain of the recipe's lock (or lock=)."""
    key = load_signing_key()
    config = load_config(settings.repo_root)
    if settings.flag("toolchain"):
        return push_toolchain_verb(settings, config, key)
    artifacts = chosen_artifacts(settings, Store(settings.store_root))
    stats = TransferStats()
    records = push_many(artifacts, config, key, stats=stats)
    target = config.push_url
    for r in records:
        console.print(f"pushed {r.name} to {target} (signed by {key.name})")
    console.print(f"{stats.blobs_uploaded} blobs uploaded ({stats.bytes_uploaded / 1e6:.1f} MB), "
                  f"{stats.blobs_present} already in the cache")
    result = {"pushed": [r.name for r in records], "url": target, "stats": stats.as_dict()}
    emit(settings, result)
    return result


def push_toolchain_verb(settings: Settings, config: CacheConfig, key: SecretKey) -> dict[str, Any]:
    from orchestrator.cache.toolchain_push import push_toolchain  # only for toolchain=1

    name = toolchain_lock_name(settings)
    lock = load_lock(settings.locks_dir, name)
    root = toolchain_root(Store(settings.store_root), lock)
    if not (root / TOOLCHAIN_JSON).is_file():
        raise UserError(f"the toolchain of lock {name} is not in {root.parent}; run "
                        f"`doit toolchain lock={name}` first")
    stats = TransferStats()
    record = push_toolchain(root, lock, config, key, stats=stats)
    target = config.push_url
    console.print(f"pushed toolchain {record.hash} (lock {name}, {record.summary.files} files, "
                  f"{len(record.relocate)} to relocate) to {target} (signed by {key.name})")
    console.print(f"{stats.blobs_uploaded} blobs uploaded ({stats.bytes_uploaded / 1e6:.1f} MB), "
                  f"{stats.blobs_present} already in the cache")
    result = {"pushed": [f"toolchain-{record.hash}"], "url": target, "stats": stats.as_dict()}
    emit(settings, result)
    return result
