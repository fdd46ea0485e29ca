"""`doit pull`: fetch recipe/variant (or id=) from the substituters into the store; never builds."""
from __future__ import annotations

from typing import Any

from orchestrator.artifact_ref import named_artifact
from orchestrator.cache.cache_toml import load_config
from orchestrator.cache.errors import CacheError
from orchestrator.cache.pull import pull, transfer_summary
from orchestrator.cache.transfer import TransferStats
from orchestrator.console import console
from orchestrator.errors import UserError
from orchestrator.settings import Settings
from orchestrator.store import Store
from orchestrator.verbs.output import emit


def cmd_pull(settings: Settings) -> dict[str, Any]:
    """Fetch an artifact from the substituters into the store (nothing is built)."""
    store = Store(settings.store_root).ensure()
    store.clean_stale()
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
    got = pull(store, artifact_id, config, stats=stats)
    if got is None:
        raise CacheError(f"no substituter has {name}: "
                         f"{', '.join(config.substituters)}; build it with `doit build`")
    path, url = got
    console.print(f"pulled {path.name} from {url}: {transfer_summary(stats)}")
    result = {"path": str(path), "origin": url, "stats": stats.as_dict()}
    emit(settings, result)
    return result
