"""The cache's command-line verbs (`doit pull`, `doit push`, `doit cache-keygen`).

tasks.py wraps these; each takes Settings, prints what it did, returns a JSON-able result.
"""
from __future__ import annotations

import json
import re
import sys
from typing import Any

from orchestrator.cache.config import load_config
from orchestrator.cache.errors import CacheError
from orchestrator.cache.pull import describe, pull
from orchestrator.cache.push import push_many
from orchestrator.cache.signing import default_key_dir, load_signing_key, write_key_pair
from orchestrator.cache.transfer import TransferStats
from orchestrator.console import console
from orchestrator.errors import UserError
from orchestrator.settings import Settings
from orchestrator.store import Store


def _emit(settings: Settings, result: dict[str, Any]) -> dict[str, Any]:
    if settings.fmt == "json":
        sys.stdout.write(json.dumps(result, sort_keys=True, indent=2) + "\n")
    return result


def _artifact_id(settings: Settings, store: Store) -> tuple[str, str]:
    """(artifact id, display name) from id=... or from recipe + variant."""
    wanted = settings.vars.get("id", "").strip()
    if wanted:
        if not re.fullmatch(r"[0-9a-f]{40}", wanted):
            raise UserError(f"id={wanted!r}: an artifact id is 40 lowercase hex characters")
        return wanted, wanted
    from orchestrator.plan import make_plan
    plan = make_plan(settings, store)
    return plan.artifact_id, plan.name


def cmd_pull(settings: Settings) -> dict[str, Any]:
    """Fetch an artifact from the substituters into the store (nothing is built)."""
    store = Store(settings.store_root).ensure()
    store.clean_stale()
    artifact_id, name = _artifact_id(settings, store)
    if (found := store.find(artifact_id)) is not None:
        console.print(f"{found.name} is already in the store")
        return _emit(settings, {"path": str(found), "origin": "present"})
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
    console.print(f"pulled {path.name} from {url}: {describe(stats)}")
    return _emit(settings, {"path": str(path), "origin": url, "stats": stats.as_dict()})


def cmd_push(settings: Settings) -> dict[str, Any]:
    """Upload one artifact (recipe+variant or id=) or all=1 artifacts of a recipe."""
    key = load_signing_key()
    config = load_config(settings.repo_root)
    store = Store(settings.store_root)
    if settings.vars.get("all", "0") not in ("0", ""):
        artifacts = [a for a in store.artifacts()
                     if Store.read_manifest(a).recipe == settings.recipe]
        if not artifacts:
            raise UserError(f"no artifacts of recipe {settings.recipe!r} in {store.root}; "
                            "build some first")
    else:
        artifact_id, name = _artifact_id(settings, store)
        found = store.find(artifact_id)
        if found is None:
            raise UserError(f"{name} is not in {store.root}; run `doit build` (or pull) first")
        artifacts = [found]
    stats = TransferStats()
    records = push_many(artifacts, config, key, stats=stats)
    target = config.push_url
    for r in records:
        console.print(f"pushed {r.name} to {target} (signed by {key.name})")
    console.print(f"{stats.blobs_uploaded} blobs uploaded ({stats.bytes_uploaded / 1e6:.1f} MB), "
                  f"{stats.blobs_present} already in the cache")
    return _emit(settings, {"pushed": [r.name for r in records], "url": target,
                            "stats": stats.as_dict()})


def cmd_keygen(settings: Settings) -> dict[str, Any]:
    """Write an ed25519 key pair outside the repository and print the public key line."""
    name = settings.vars.get("name", "").strip()
    if not name:
        raise UserError("cache-keygen needs a key name: doit cache-keygen name=team-1")
    secret, public = write_key_pair(name, default_key_dir(), repo_root=settings.repo_root)
    console.print(f"secret key written to {secret} (keep it private; pushers set "
                  f"ORCH_CACHE_SIGNING_KEY={secret})")
    console.print("add this line to trusted-keys in cache.toml:")
    result = {"secret_key_file": str(secret), "public_key": public}
    if settings.fmt != "json":
        print(public)
    return _emit(settings, result)
