"""Checked before any cell builds: with push, the signing key, write credentials for an HTTP
cache and the push URL taking a write (a probe written and read back); and the worker's tags
(ORCH_NIGHTLY_WORKER_TAGS, set by the CI engine) against the cells it was given. Every
problem in one line (UserError, exit 2); nothing is built."""
from __future__ import annotations

import os
import socket
import time

from orchestrator.bot.matrix import Cell
from orchestrator.config.settings import Settings
from orchestrator.errors import UserError

WORKER_TAGS_ENV = "ORCH_NIGHTLY_WORKER_TAGS"
PROBE_NAME = "nightly-preflight"


def cells_probe_key(cells: list[Cell]) -> str:
    """One probe per host and set of cells: the cells of one night run at the same time (a CI
    engine's parallel jobs), and one worker's write must not be read back by another."""
    from orchestrator.cache.backend import probe_key
    return probe_key(PROBE_NAME, socket.gethostname(), *sorted(c.name for c in cells))


def push_problems(settings: Settings, cells: list[Cell]) -> list[str]:
    from orchestrator.cache.backends import open_backend
    from orchestrator.cache.cache_toml import Credentials, config_path, load_config
    from orchestrator.cache.errors import CacheError
    from orchestrator.cache.signing import load_signing_key

    config = load_config(settings.repo_root)  # a malformed file: its own one line
    url = config.push_url
    if not url:
        return [f"push is on but {config_path(settings.repo_root)} names no push URL or substituter"]
    problems = []
    try:
        load_signing_key()
    except UserError as e:
        problems.append(str(e))
    creds = Credentials.from_env()
    if url.startswith(("http://", "https://")) and not creds.present():
        return [*problems, f"push to {url} needs write credentials: set {creds.missing()}"]
    key = cells_probe_key(cells)
    body = f"nightly preflight {socket.gethostname()} {os.getpid()} {time.time():.0f}\n".encode()
    try:
        backend = open_backend(url, config, creds)
        try:
            backend.put(key, lambda: iter([body]), len(body))
            back = backend.get(key)
        finally:
            backend.close()
    except (CacheError, OSError) as e:
        return [*problems, f"cache {url} is not writable: {e}"]
    if back != body:
        problems.append(f"cache {url}: the probe written to {key} did not read back the same")
    return problems


def worker_problems(cells: list[Cell], tags_value: str | None) -> list[str]:
    """A GPU cell given to a worker not tagged gpu (the engine's placement is wrong)."""
    if tags_value is None:
        return []
    tags = {t.strip() for t in tags_value.split(",") if t.strip()}
    return [f"cell {c.name} needs a worker tagged gpu; this one is tagged "
            f"{','.join(sorted(tags)) or 'nothing'} ({WORKER_TAGS_ENV})"
            for c in cells if c.requires_gpu and "gpu" not in tags]


def preflight(settings: Settings, cells: list[Cell], push: bool) -> None:
    problems = worker_problems(cells, os.environ.get(WORKER_TAGS_ENV))
    if push:
        problems += push_problems(settings, cells)
    if problems:
        raise UserError("nightly preflight: " + "; ".join(problems) + "; nothing was built")
