"""Cache settings: the committed cache.toml (where, whom to trust) plus secrets from the env.

cache.toml (repo root, or the file named by ORCH_CACHE_CONFIG):

    [cache]
    substituters = ["http://cache.internal:8080/orch/", "file:///mnt/team-cache"]
    push = "http://cache.internal:8080/orch/"
    trusted-keys = ["team-1:<base64>"]
    jobs = 8            # parallel blob transfers
    timeout = 30        # seconds per network operation

Secrets never live in a file of the repository: ORCH_CACHE_TOKEN (bearer) or
ORCH_CACHE_USER + ORCH_CACHE_PASSWORD (basic) for writes, ORCH_CACHE_SIGNING_KEY for signing.
"""
from __future__ import annotations

import ipaddress
import os
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from orchestrator.errors import UserError
from orchestrator.memo.file_reads import note_path
from orchestrator.model.user_file import read_toml

if TYPE_CHECKING:  # nacl: loaded only where keys are used, not by every build's settings
    from orchestrator.cache.signing import TrustedKeys

M = TypeVar("M", bound=BaseModel)
CONFIG_ENV = "ORCH_CACHE_CONFIG"
TOKEN_ENV = "ORCH_CACHE_TOKEN"
USER_ENV = "ORCH_CACHE_USER"
PASSWORD_ENV = "ORCH_CACHE_PASSWORD"
URL_SCHEMES = ("http://", "https://", "file://", "oci://")


def check_url(url: str) -> str:
    """A cache URL urllib can take apart: a known scheme, a parseable host and port."""
    if not url.startswith(URL_SCHEMES):
        raise ValueError(f"{url[:200]!r} must start with http://, https://, file:// or oci://")
    if any(ord(c) < 0x20 or c == "\x7f" for c in url):
        raise ValueError(f"{url[:200]!r} contains a control character")
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as e:
        raise ValueError(f"{url[:200]!r} is not a valid URL ({e})") from None
    if parts.scheme != "file" and not _host_ok(parts.hostname or ""):
        raise ValueError(f"{url[:200]!r} has no valid host name")
    return url


HOST_LABEL = re.compile(r"^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$")


def _host_ok(host: str) -> bool:
    """A DNS name (labels of at most 63, at most 253 in all) or an IP address."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    return 0 < len(host) <= 253 and all(HOST_LABEL.match(p) for p in host.lower().split("."))


class CacheConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    substituters: list[str] = []
    push: str = ""
    trusted_keys: list[str] = Field(default=[], alias="trusted-keys")
    jobs: int = Field(default=8, ge=1, le=64)
    timeout: float = Field(default=30.0, gt=0)

    @field_validator("substituters")
    @classmethod
    def _urls(cls, urls: list[str]) -> list[str]:
        for u in urls:
            check_url(u)
        return urls

    @field_validator("push")
    @classmethod
    def _push(cls, url: str) -> str:
        return check_url(url) if url else url

    @property
    def push_url(self) -> str:
        return self.push or (self.substituters[0] if self.substituters else "")

    def trusted(self) -> TrustedKeys:
        from orchestrator.cache.signing import TrustedKeys

        return TrustedKeys(self.trusted_keys)


def config_path(repo_root: Path, env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get(CONFIG_ENV) or repo_root / "cache.toml")


def read_cache_toml(repo_root: Path, env: Mapping[str, str] | None = None) -> tuple[Path, dict[str, Any] | None]:
    """cache.toml (or $ORCH_CACHE_CONFIG) read once for every table of it: its path and its
    data, None when the default file is absent (no artifact cache, a local compile cache)."""
    env = os.environ if env is None else env
    path = config_path(repo_root, env)
    note_path(path)  # a plan memo: a cache.toml written later counts
    if not path.is_file():
        if env.get(CONFIG_ENV):
            raise UserError(f"{CONFIG_ENV}={path}: no such file")
        return path, None
    return path, read_toml(path, "fix the cache config")


def table_of(path: Path, data: dict[str, Any] | None, name: str, model: type[M]) -> M:
    """Table [name] of cache.toml validated by `model` (its defaults when absent); a bad
    value is one line naming the file and the key."""
    table = {} if data is None else data.get(name, {})
    if not isinstance(table, dict):
        raise UserError(f"{path}: {name} must be a table ([{name}])")
    try:
        return model.model_validate(table)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(x) for x in err["loc"])
        raise UserError(f"{path}: {name}.{field}: {err['msg']}") from None


def load_config(repo_root: Path, env: Mapping[str, str] | None = None) -> CacheConfig:
    """The artifact cache's [cache]; a missing default file means "no cache"."""
    path, data = read_cache_toml(repo_root, env)
    cfg = table_of(path, data, "cache", CacheConfig)
    cfg.trusted()  # parse the keys now so a bad line is reported with the file
    return cfg


@dataclass(frozen=True)
class Credentials:
    """Write credentials from the environment: a bearer token or user + password."""
    token: str = ""
    user: str = ""
    password: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Credentials:
        env = os.environ if env is None else env
        return cls(env.get(TOKEN_ENV, ""), env.get(USER_ENV, ""), env.get(PASSWORD_ENV, ""))

    def present(self) -> bool:
        return bool(self.token or (self.user and self.password))

    def missing(self) -> str:
        """Which variable(s) to set, for a refused write."""
        if self.user and not self.password:
            return f"{PASSWORD_ENV} (for {USER_ENV}={self.user})"
        if self.password and not self.user:
            return USER_ENV
        if self.present():
            return f"valid credentials ({TOKEN_ENV} or {USER_ENV}/{PASSWORD_ENV} were rejected)"
        return f"{TOKEN_ENV}, or {USER_ENV} and {PASSWORD_ENV}"
