"""http(s) backend: plain GET / HEAD / PUT (nginx WebDAV, bazel-remote, any PUT server).

GET and HEAD are retried by urllib3 with backoff; PUT is retried here with a fresh body
stream each attempt (a consumed generator must never be re-sent as an empty upload).
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.util.retry import Retry

from orchestrator.cache.backend import CHUNK, RECORD_LIMIT, Body, window
from orchestrator.cache.cache_toml import CacheConfig, Credentials
from orchestrator.cache.deadline import Deadline, attach_current, blob_deadline
from orchestrator.cache.errors import CacheError, TransferInterrupted

RETRY_STATUS = (429, 500, 502, 503, 504)
PUT_ATTEMPTS = 3


def _reason(exc: Exception) -> str:
    text = str(exc)
    for needle in ("Connection refused", "timed out", "Name or service not known",
                   "Connection reset", "Connection aborted", "No route to host",
                   "Temporary failure in name resolution", "IncompleteRead",
                   "CERTIFICATE_VERIFY_FAILED"):
        if needle in text:
            return needle
    return type(exc).__name__


class _DeadlineHTTPConnection(HTTPConnection):
    """Joins the calling thread's Deadline before each request (so it can be cut off)."""

    def request(self, *args, **kwargs):  # noqa: ANN002,ANN003,ANN201 - urllib3's signature
        attach_current(self)
        return super().request(*args, **kwargs)


class _DeadlineHTTPSConnection(HTTPSConnection):
    def request(self, *args, **kwargs):  # noqa: ANN002,ANN003,ANN201
        attach_current(self)
        return super().request(*args, **kwargs)


class _DeadlineHTTPPool(HTTPConnectionPool):
    ConnectionCls = _DeadlineHTTPConnection


class _DeadlineHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _DeadlineHTTPSConnection


def deadline_adapter(config: CacheConfig) -> HTTPAdapter:
    """GET/HEAD retried with backoff, one pool per host, connections that join a Deadline."""
    retry = Retry(total=3, connect=3, read=2, status=3, backoff_factor=0.25,
                  status_forcelist=RETRY_STATUS, allowed_methods={"GET", "HEAD"},
                  raise_on_status=False)
    adapter = HTTPAdapter(max_retries=retry, pool_connections=2, pool_maxsize=config.jobs + 4)
    adapter.poolmanager.pool_classes_by_scheme = {"http": _DeadlineHTTPPool,
                                                  "https": _DeadlineHTTPSPool}
    return adapter


def forget_pooled(session: requests.Session) -> None:
    """Drop a session's pooled connections without a word on their sockets: in a forked
    child, whose parent keeps using them (closing the child's copy of a descriptor ends
    nothing while the parent holds its own)."""
    for adapter in session.adapters.values():
        if isinstance(adapter, HTTPAdapter):
            adapter.poolmanager.clear()


def unreachable_reason(exc: Exception) -> str:
    return _reason(exc)


class HttpBackend:
    def __init__(self, url: str, config: CacheConfig, creds: Credentials) -> None:
        self.url = url if url.endswith("/") else url + "/"
        self.creds = creds
        self.timeout = (min(config.timeout, 10.0), config.timeout)
        self.session = requests.Session()
        adapter = deadline_adapter(config)
        self.deadline_s = config.timeout
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        # Proxies from the environment are resolved once for this URL, not on every request
        # (requests re-reads os.environ per request otherwise: ~0.4 ms for each small blob).
        self.session.proxies = requests.utils.get_environ_proxies(self.url)
        self.session.trust_env = False
        self.session.headers["User-Agent"] = "orchestrator-cache/1"
        if creds.token:
            self.session.headers["Authorization"] = f"Bearer {creds.token}"
        elif creds.user and creds.password:
            self.session.auth = (creds.user, creds.password)

    def _down(self, exc: Exception) -> CacheError:
        return CacheError(f"cache {self.url} is down or unreachable ({_reason(exc)}); "
                          "check the URL in cache.toml or use substitute=0")

    def _refused(self, verb: str, key: str, resp: requests.Response) -> CacheError:
        code = resp.status_code
        if code == 401:
            hint = f"set {self.creds.missing()}"
        elif code == 403:
            hint = "the server forbids it (credentials without write access?)"
        elif code in (405, 501) and verb == "PUT":
            hint = "the server does not accept PUT (nginx: dav_methods PUT; create_full_put_path on;)"
        elif code == 413:
            hint = "the server limits upload size (nginx: client_max_body_size 0;)"
        else:
            hint = f"HTTP {code} {resp.reason}"
        action = "push to" if verb == "PUT" else "read from"
        return CacheError(f"{action} {self.url} refused ({verb} {key}: {code}): {hint}")

    def _deadline(self, verb: str, key: str, size: int = 0) -> Deadline:
        return Deadline(blob_deadline(self.deadline_s, size), f"cache {self.url}: {verb} {key}")

    def exists(self, key: str) -> bool:
        with self._deadline("HEAD", key):
            return self._exists(key)

    def _exists(self, key: str) -> bool:
        try:
            r = self.session.head(self.url + key, timeout=self.timeout, allow_redirects=True)
        except requests.RequestException as e:
            raise self._down(e) from None
        if r.status_code == 200:
            return True
        if r.status_code == 404:
            return False
        raise self._refused("HEAD", key, r)

    def get(self, key: str, limit: int = RECORD_LIMIT) -> bytes | None:
        with self._deadline("GET", key):
            return self._get(key, limit)

    def _get(self, key: str, limit: int) -> bytes | None:
        try:
            with self.session.get(self.url + key, timeout=self.timeout, stream=True) as r:
                if r.status_code == 404:
                    return None
                if r.status_code != 200:
                    raise self._refused("GET", key, r)
                data = bytearray()
                for chunk in r.raw.stream(CHUNK, decode_content=True):
                    data += chunk
                    if len(data) > limit:
                        raise CacheError(f"cache {self.url}: {key} is larger than {limit} bytes")
                return bytes(data)
        except (requests.ConnectionError, requests.Timeout) as e:
            raise self._down(e) from None
        except (urllib3.exceptions.HTTPError, requests.RequestException) as e:
            raise CacheError(f"cache {self.url}: transfer of {key} was cut short "
                             f"({_reason(e)})") from None

    @contextlib.contextmanager
    def stream(self, key: str, size: int = 0, start: int = 0,
               length: int | None = None) -> Iterator[Iterator[bytes]]:
        with self._deadline("GET", key, size), self._stream(key, start, length) as chunks:
            yield chunks

    @contextlib.contextmanager
    def _stream(self, key: str, start: int = 0,
                length: int | None = None) -> Iterator[Iterator[bytes]]:
        ranged = start > 0 or length is not None
        last = "" if length is None else str(start + length - 1)
        headers = {"Range": f"bytes={start}-{last}"} if ranged else None
        try:
            r = self.session.get(self.url + key, timeout=self.timeout, stream=True,
                                 headers=headers)
        except requests.RequestException as e:
            raise self._down(e) from None
        with r:
            if r.status_code == 404:
                raise CacheError(f"cache {self.url}: {key} is missing (incomplete cache?)")
            if ranged and r.status_code == 416:  # the object ends before `start`
                yield iter(())
                return
            skip = start  # a server that ignores Range sends it all (200): skip to `start`
            if ranged and r.status_code == 206:
                answered = r.headers.get("Content-Range", "")
                if not answered.startswith(f"bytes {start}-"):
                    raise CacheError(f"refused {self.url}{key}: asked for bytes {start}-{last}, "
                                     f"the server sent {answered[:80]!r}")
                skip = 0
            elif r.status_code != 200:
                raise self._refused("GET", key, r)
            try:
                yield window(r.raw.stream(CHUNK, decode_content=False), skip, length)
            except (urllib3.exceptions.HTTPError, requests.RequestException) as e:
                raise TransferInterrupted(f"cache {self.url}: transfer of {key} was cut short "
                                 f"({_reason(e)})") from None

    def put(self, key: str, body: Body, size: int = 0) -> int:
        with self._deadline("PUT", key, size * PUT_ATTEMPTS):
            return self._put(key, body)

    def _put(self, key: str, body: Body) -> int:
        for attempt in range(PUT_ATTEMPTS):
            sent = 0

            def counted() -> Iterator[bytes]:
                nonlocal sent
                for chunk in body():
                    sent += len(chunk)
                    yield chunk
            try:
                r = self.session.put(self.url + key, data=counted(), timeout=self.timeout)
            except (requests.ConnectionError, requests.Timeout) as e:
                if attempt + 1 == PUT_ATTEMPTS:
                    raise self._down(e) from None
                time.sleep(0.25 * 2 ** attempt)
                continue
            if r.status_code in (200, 201, 204):
                return sent
            if r.status_code in RETRY_STATUS and attempt + 1 < PUT_ATTEMPTS:
                time.sleep(0.25 * 2 ** attempt)
                continue
            raise self._refused("PUT", key, r)
        raise AssertionError("unreachable")

    def forget_connections(self) -> None:
        forget_pooled(self.session)

    def close(self) -> None:
        self.session.close()
