"""HTTP for `oci://` caches: one repository of a registry (the distribution API), auth renewed
on 401 (cache/oci_auth.py), redirects checked, every failure one CacheError line.

`oci://host[:port]/repo/path` speaks https, except to a loopback host (127.0.0.0/8, ::1,
localhost), which gets plain http, as Docker treats those registries. Redirects: followed
within the registry's own scheme://host:port; a blob GET may also go to another https host
(object storage behind GHCR, ECR, ...) without the Authorization header, its bytes checked
against the digest anyway; any other redirect to another host is refused.
"""
from __future__ import annotations

import json
import re
from urllib.parse import urljoin, urlsplit

import requests

from orchestrator.cache.cache_toml import CacheConfig, Credentials
from orchestrator.cache.errors import CacheError
from orchestrator.cache.http import deadline_adapter, unreachable_reason
from orchestrator.cache.oci_auth import RegistryAuth, is_loopback

# The distribution spec's repository name grammar (lowercase path components).
REPO_RE = re.compile(r"^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*$")
REDIRECTS = (301, 302, 303, 307, 308)
MAX_HOPS = 3
ERROR_BODY_LIMIT = 4096
SMALL_BODY = 64 << 10


def split_oci_url(url: str) -> tuple[str, str]:
    """`oci://host[:port]/repo` -> ("http(s)://host[:port]", "repo"); CacheError if not."""
    parts = urlsplit(url)
    repo = parts.path.strip("/")
    if parts.scheme != "oci" or not parts.hostname or not REPO_RE.match(repo) \
            or parts.query or parts.fragment or len(repo) > 255:
        raise CacheError(f"cache URL {url[:200]!r}: use oci://host[:port]/repository (lowercase "
                         "letters, digits, . _ - and / in the repository name)")
    scheme = "http" if is_loopback(parts.hostname) else "https"
    return f"{scheme}://{parts.netloc}", repo


def _origin(url: str) -> tuple[str, str, int | None]:
    p = urlsplit(url)
    return p.scheme, (p.hostname or "").lower(), p.port


def _drained(r: requests.Response, method: str) -> requests.Response:
    """Read a small body that no caller streams (HEAD, 201/202, errors, 404) now, so that
    closing the response keeps its connection in the pool instead of dropping it."""
    length = r.headers.get("Content-Length", "")
    if method == "HEAD" or (r.status_code != 200 and length.isdigit()
                            and int(length) <= SMALL_BODY):
        try:
            r.content  # noqa: B018 - reads and marks the body consumed
        except requests.RequestException:
            pass  # the caller's own read reports it
    return r


class RegistryClient:
    """Requests to one registry repository; `url` is the cache URL messages name."""

    def __init__(self, url: str, config: CacheConfig, creds: Credentials) -> None:
        self.url = url if url.endswith("/") else url + "/"
        self.base, self.repo = split_oci_url(self.url)
        self.api = f"{self.base}/v2/{self.repo}/"
        self.creds = creds
        self.timeout = (min(config.timeout, 10.0), config.timeout)
        self.session = requests.Session()
        adapter = deadline_adapter(config)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.session.proxies = requests.utils.get_environ_proxies(self.base)
        self.session.trust_env = False
        self.session.headers["User-Agent"] = "orchestrator-cache/1"
        self.auth = RegistryAuth(self.session, creds, self.url, self.timeout)

    def down(self, exc: Exception) -> CacheError:
        return CacheError(f"cache {self.url} is down or unreachable ({unreachable_reason(exc)}); "
                          "check the URL in cache.toml or use substitute=0")

    def refused(self, method: str, what: str, resp: requests.Response) -> CacheError:
        code = resp.status_code
        if code == 401:
            hint = f"set {self.creds.missing()}"
        elif code == 403:
            hint = "the registry forbids it (credentials without access to this repository?)"
        elif code == 413:
            hint = "the registry limits upload size"
        else:
            hint = f"HTTP {code} {resp.reason}{self._registry_error(resp)}"
        action = "push to" if method in ("PUT", "POST", "PATCH") else "read from"
        return CacheError(f"{action} {self.url} refused ({method} {what}: {code}): {hint}")

    @staticmethod
    def _registry_error(resp: requests.Response) -> str:
        """The registry's own error code and message ({"errors": [{code, message}]})."""
        try:
            raw = resp.content[:ERROR_BODY_LIMIT] if resp._content_consumed \
                else resp.raw.read(ERROR_BODY_LIMIT, decode_content=True)
            first = json.loads(raw)["errors"][0]
            return f" ({str(first.get('code', ''))[:60]}: {str(first.get('message', ''))[:200]})"
        except Exception:  # noqa: BLE001 - any body that is not the documented shape: no detail
            return ""

    def send(self, method: str, url: str, what: str, *, headers: dict[str, str] | None = None,
             data: bytes | None = None, blob: bool = False) -> requests.Response:
        """The response (streaming; the caller closes it), after auth and allowed redirects.
        `blob`: a blob GET, which may be redirected to another https host."""
        authed = True
        renewed = False
        for _hop in range(MAX_HOPS + 2):
            sent = self.auth.header() if authed else {}
            try:
                r = self.session.request(method, url, headers={**(headers or {}), **sent},
                                         data=data, stream=True, timeout=self.timeout,
                                         allow_redirects=False)
            except requests.RequestException as e:
                raise self.down(e) from None
            if r.status_code == 401 and authed and not renewed:
                r.close()
                self.auth.renew(r, sent, lambda resp: self.refused(method, what, resp))
                renewed = True
                continue
            if r.status_code not in REDIRECTS:
                return _drained(r, method)
            r.close()
            target = urljoin(url, r.headers.get("Location", ""))
            if _origin(target) != _origin(self.base):
                if not (blob and method == "GET" and target.startswith("https://")):
                    raise CacheError(f"refused {self.url}{what}: the registry redirected {method} "
                                     f"to another host ({urlsplit(target).netloc[:100]}); only "
                                     "blob downloads may move to another (https) host")
                authed = False  # credentials stay with the registry
            url = target
        raise CacheError(f"refused {self.url}{what}: more than {MAX_HOPS} redirects")

    def close(self) -> None:
        self.session.close()
