"""Uploading one blob to an `oci://` cache: POST, then one PUT (small) or PATCH chunks of
UPLOAD_CHUNK bytes and a closing PUT (big), the digest computed while the body streams.

The registry commits the blob only on the closing PUT `?digest=sha256:…`: a body that fails
its own check (the local store changed under a push) or a cut connection leaves nothing.
A refused or broken attempt is repeated with a fresh body, at most PUT_ATTEMPTS times.
"""
from __future__ import annotations

import hashlib
import time
from urllib.parse import urlencode, urljoin, urlsplit

import requests

from orchestrator.cache.backend import Body
from orchestrator.cache.errors import CacheError
from orchestrator.cache.http import PUT_ATTEMPTS, RETRY_STATUS
from orchestrator.cache.oci_client import RegistryClient

UPLOAD_CHUNK = 16 << 20
OCTETS = "application/octet-stream"


class _Again(Exception):
    """This attempt failed in a way worth repeating (connection, 5xx)."""

    def __init__(self, error: CacheError) -> None:
        super().__init__(str(error))
        self.error = error


def _checked(client: RegistryClient, r: requests.Response, method: str, what: str,
             ok: int) -> requests.Response:
    with r:
        if r.status_code == ok:
            return r
        error = client.refused(method, what, r)
    raise _Again(error) if r.status_code in RETRY_STATUS else error


def _location(client: RegistryClient, r: requests.Response, current: str, what: str) -> str:
    target = urljoin(current, r.headers.get("Location", ""))
    here, there = urlsplit(client.base), urlsplit(target)
    if (here.scheme, here.netloc) != (there.scheme, there.netloc):
        raise CacheError(f"push to {client.url} refused: its upload of {what} moves to another "
                         f"host ({there.netloc[:100]}); credentials are never sent there")
    return target


def _send(client: RegistryClient, method: str, url: str, what: str, ok: int,
          data: bytes | None = None, headers: dict[str, str] | None = None) -> requests.Response:
    try:
        return _checked(client, client.send(method, url, what, data=data, headers=headers),
                        method, what, ok)
    except CacheError as e:
        if "is down or unreachable" in str(e):
            raise _Again(e) from None
        raise


def _once(client: RegistryClient, body: Body, what: str, expect: str | None) -> tuple[str, int]:
    start = client.api + "blobs/uploads/"
    r = _send(client, "POST", start, what, 202)
    location = _location(client, r, start, what)
    h = hashlib.sha256()
    size = 0
    buf = bytearray()
    try:
        for chunk in body():
            buf += chunk
            if len(buf) >= UPLOAD_CHUNK:
                data = bytes(buf)
                buf.clear()
                r = _send(client, "PATCH", location, what, 202, data,
                          {"Content-Type": OCTETS,
                           "Content-Range": f"{size}-{size + len(data) - 1}"})
                location = _location(client, r, location, what)
                h.update(data)
                size += len(data)
        h.update(buf)
        size += len(buf)
        digest = f"sha256:{h.hexdigest()}"
        if expect is not None and digest != expect:
            raise CacheError(f"push aborted: {what} has digest {digest}, not {expect}")
    except BaseException:
        try:
            client.send("DELETE", location, what).close()  # the registry drops the upload
        except CacheError:
            pass
        raise
    sep = "&" if "?" in location else "?"
    _send(client, "PUT", f"{location}{sep}{urlencode({'digest': digest})}", what, 201,
          bytes(buf), {"Content-Type": OCTETS})
    return digest, size


def upload_blob(client: RegistryClient, body: Body, what: str,
                expect: str | None = None) -> tuple[str, int]:
    """Upload `body` as a blob; (its digest, bytes sent). `expect`: the digest it must have."""
    for attempt in range(PUT_ATTEMPTS):
        try:
            return _once(client, body, what, expect)
        except _Again as again:
            if attempt + 1 == PUT_ATTEMPTS:
                raise again.error from None
            time.sleep(0.25 * 2 ** attempt)
    raise AssertionError("unreachable")
