"""`doit push`: upload recipe/variant (or id=, or all=1: every stored artifact of the recipe)
to the cache, signed."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.artifact_ref import named_artifact
from orchestrator.cache.cache_toml import load_config
from orchestrator.cache.push import push_many
from orchestrator.cache.signing import load_signing_key
from orchestrator.cache.transfer import TransferStats
from orchestrator.console import console
from orchestrator.errors import UserError
from orchestrator.settings import Settings
from orchestrator.store import Store
from orchestrator.verbs.output import emit


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
    """Upload one artifact (recipe+variant or id=) or all=1 artifacts of a recipe."""
    key = load_signing_key()
    config = load_config(settings.repo_root)
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
