"""Registry auth for `oci://` caches: the distribution token flow, secrets from the env only.

A registry that wants auth answers 401 with `WWW-Authenticate: Bearer realm="…",
service="…",scope="…"`. The client then asks the realm (GET `realm?service=…&scope=…`) for
a token, with ORCH_CACHE_USER / ORCH_CACHE_PASSWORD as basic auth when both are set
(anonymous otherwise: public pulls), and repeats the request with `Authorization: Bearer`.
ORCH_CACHE_TOKEN, when set, is a registry token sent as it is (no exchange). A `Basic`
challenge gets the user and password directly. Credentials go to a realm only over https,
or plain http to a loopback address (the test registry); never into a file or a message.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Callable
from urllib.parse import urlsplit

import requests

from orchestrator.cache.cache_toml import Credentials
from orchestrator.cache.errors import CacheError

TOKEN_LIMIT = 64 << 10
_PARAM = re.compile(r'([A-Za-z_]+)\s*=\s*(?:"([^"]*)"|([^\s,]*))')
LOOPBACK = ("127.", "localhost", "[::1]", "::1")


def is_loopback(host: str) -> bool:
    """Plain http is used (and allowed for a token realm) only for these hosts."""
    return host.startswith(LOOPBACK)


def parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    """`Bearer realm="x",service="y"` -> ("bearer", {"realm": "x", "service": "y"})."""
    scheme, _, rest = header.strip().partition(" ")
    params = {m.group(1).lower(): m.group(2) if m.group(2) is not None else m.group(3)
              for m in _PARAM.finditer(rest)}
    return scheme.lower(), params


class RegistryAuth:
    """The Authorization header for a registry's requests, renewed on 401 (thread-safe)."""

    def __init__(self, session: requests.Session, creds: Credentials, where: str,
                 timeout: tuple[float, float]) -> None:
        self.session = session
        self.creds = creds
        self.where = where
        self.timeout = timeout
        self._lock = threading.Lock()
        self._header = f"Bearer {creds.token}" if creds.token else ""

    def header(self) -> dict[str, str]:
        return {"Authorization": self._header} if self._header else {}

    def renew(self, resp: requests.Response, sent: dict[str, str],
              refused: Callable[[requests.Response], CacheError]) -> None:
        """After a 401: get a fresh header from the challenge, or raise `refused(resp)`.
        `sent`: the header the refused request carried (another thread may have renewed)."""
        with self._lock:
            if self._header and sent.get("Authorization") != self._header:
                return  # renewed meanwhile: try with that one
            scheme, params = parse_challenge(resp.headers.get("WWW-Authenticate", ""))
            if scheme == "basic" and self.creds.user and self.creds.password \
                    and not self._header.startswith("Basic"):
                self._header = requests.auth._basic_auth_str(self.creds.user,  # noqa: SLF001
                                                             self.creds.password)
                return
            if scheme != "bearer" or not params.get("realm") or self.creds.token:
                raise refused(resp)
            self._header = "Bearer " + self._token(params, refused)

    def _token(self, params: dict[str, str],
               refused: Callable[[requests.Response], CacheError]) -> str:
        realm = params["realm"]
        parts = urlsplit(realm)
        if parts.scheme != "https" and not (parts.scheme == "http"
                                            and is_loopback(parts.hostname or "")):
            raise CacheError(f"cache {self.where}: the registry's token service {realm[:200]!r} "
                             "is not https; credentials are never sent there")
        query = {"service": params.get("service", "")}
        scope = params.get("scope", "")
        if scope:
            query["scope"] = scope
        auth = (self.creds.user, self.creds.password) if self.creds.user and self.creds.password \
            else None
        try:
            r = self.session.get(realm, params=query, auth=auth, timeout=self.timeout,
                                 allow_redirects=False, stream=True)
        except requests.RequestException as e:
            raise CacheError(f"cache {self.where}: token service {parts.netloc} is unreachable "
                             f"({type(e).__name__})") from None
        with r:
            if r.status_code != 200:
                raise refused(r)
            body = r.raw.read(TOKEN_LIMIT + 1, decode_content=True)
        try:
            doc = requests.models.complexjson.loads(body) if len(body) <= TOKEN_LIMIT else None
        except ValueError:
            doc = None
        token = (doc.get("token") or doc.get("access_token")) if isinstance(doc, dict) else None
        if not isinstance(token, str) or not token or not token.isprintable() or " " in token:
            raise CacheError(f"cache {self.where}: token service {parts.netloc} sent no usable "
                             "token")
        return token
