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

from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from orchestrator.cache.cache_toml import read_cache_toml, table_of

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
    path, data = read_cache_toml(repo_root, env)
    return table_of(path, data, TABLE, CompileCacheConfig), f"{path}:{TABLE}"
