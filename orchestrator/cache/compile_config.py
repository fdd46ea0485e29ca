"""The compile cache's part of cache.toml (the same file as the artifact cache's [cache]):

    [compile_cache]
    remote = "http://cache.internal:8080/ccache/"         # ccache remote_storage; "" = local only
    distcc-hosts = ["buildbox1/16", "buildbox2:3632/16"]  # distcc for misses; [] = local
    max-size = "20G"      # the local cache's limit (ccache's max_size)
    timeout = 3           # seconds: reachability probe and ccache's connect timeout

Write access to `remote` uses the artifact cache's secrets from the environment
(ORCH_CACHE_TOKEN, or ORCH_CACHE_USER + ORCH_CACHE_PASSWORD); without them it is read-only.
Nothing here reaches a derivation: these settings change how fast objects appear, not bytes.
"""
from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from orchestrator.cache.cache_toml import CONFIG_ENV, config_path
from orchestrator.errors import UserError
from orchestrator.memo.file_reads import note_path

REMOTE_SCHEMES = ("http://", "https://", "file://", "redis://")
TABLE = "compile_cache"


class CompileCacheConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    remote: str = ""
    distcc_hosts: list[str] = Field(default=[], alias="distcc-hosts")
    max_size: str = Field(default="20G", alias="max-size", pattern=r"^\d+(\.\d+)?[KMGT]i?$")
    timeout: float = Field(default=3.0, gt=0, le=60)

    @field_validator("remote")
    @classmethod
    def _remote(cls, url: str) -> str:
        if url and not url.startswith(REMOTE_SCHEMES):
            raise ValueError(f"{url[:200]!r} must start with http://, https://, file:// or redis://")
        if any(c.isspace() or c == "|" or ord(c) < 0x20 for c in url):
            raise ValueError(f"{url[:200]!r} must not contain spaces, '|' or control characters")
        return url

    @field_validator("distcc_hosts", mode="before")
    @classmethod
    def _hosts(cls, v: object) -> object:
        return v.split() if isinstance(v, str) else v


def load_compile_cache_config(repo_root: Path,
                              env: Mapping[str, str] | None = None) -> tuple[CompileCacheConfig, str]:
    """The [compile_cache] table and where it came from (for messages); a missing default
    cache.toml means local only."""
    env = os.environ if env is None else env
    path = config_path(repo_root, env)
    note_path(path)  # a plan memo: a cache.toml written later counts
    if not path.is_file():
        if env.get(CONFIG_ENV):
            raise UserError(f"{CONFIG_ENV}={path}: no such file")
        return CompileCacheConfig(), f"{path}:{TABLE}"
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: malformed TOML: {e}; fix the cache config") from None
    table = data.get(TABLE, {})
    if not isinstance(table, dict):
        raise UserError(f"{path}: {TABLE} must be a table ([{TABLE}])")
    try:
        return CompileCacheConfig.model_validate(table), f"{path}:{TABLE}"
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(x) for x in err["loc"])
        raise UserError(f"{path}: {TABLE}.{field}: {err['msg']}") from None
