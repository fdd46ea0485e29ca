"""The team's compile-cache server: probing it, ccache's remote_storage line, sccache's
WebDAV level, and URLs printed without their secrets."""
from __future__ import annotations

import http.client
import socket
import urllib.parse
from dataclasses import replace
from pathlib import Path

from orchestrator.builders.compile_cache.kind import CompileCache
from orchestrator.cache.cache_toml import Credentials
from orchestrator.console import console


def redact(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        return urllib.parse.urlunsplit(parts._replace(netloc=f"***@{host}"))
    return url


def probe_remote(url: str, timeout: float) -> str | None:
    """None when the remote answers (any HTTP status will do; the server decides per
    request), else why not."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "file":
        path = Path(parts.path)
        return None if path.is_dir() or path.parent.is_dir() else f"no directory {path}"
    try:
        if parts.scheme in ("http", "https"):
            conn_cls = http.client.HTTPSConnection if parts.scheme == "https" \
                else http.client.HTTPConnection
            conn = conn_cls(parts.hostname or "", parts.port, timeout=timeout)
            try:
                conn.request("HEAD", parts.path or "/")
                conn.getresponse().read()
            finally:
                conn.close()
        else:  # redis://
            socket.create_connection((parts.hostname or "", parts.port or 6379),
                                     timeout=timeout).close()
    except (OSError, http.client.HTTPException) as e:
        return getattr(e, "strerror", None) or str(e) or type(e).__name__
    return None


def remote_storage(url: str, creds: Credentials, timeout: float) -> str:
    """ccache's remote_storage line: the URL with the artifact cache's credentials (basic
    auth in the URL, or bearer-token=), read-only without them, and the connect timeout."""
    attrs = [f"connect-timeout={int(timeout * 1000)}"]
    if url.startswith(("http://", "https://")):
        if creds.token:
            attrs.append(f"bearer-token={creds.token}")
        elif creds.user and creds.password:
            parts = urllib.parse.urlsplit(url)
            user = urllib.parse.quote(creds.user, safe="")
            password = urllib.parse.quote(creds.password, safe="")
            url = urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:{password}@{parts.netloc}"))
    if not creds.present():
        attrs.append("read-only=true")
    return "|".join([url, *attrs])


def ccache_remote(cc: CompileCache, url: str, timeout: float) -> CompileCache:
    """ccache's remote storage when the remote answers; one warning line when it does not."""
    why = probe_remote(url, timeout)
    if why is not None:
        console.print(f"[yellow]warning:[/] compile cache remote {redact(url)} "
                      f"unreachable ({why}); using the local compile cache only")
        return cc
    return replace(cc, remote=remote_storage(url, Credentials.from_env(), timeout))


def sccache_remote(cc: CompileCache, url: str, timeout: float) -> CompileCache:
    """sccache's WebDAV level for an http(s) remote (probed like ccache's), credentials as
    for ccache (the artifact cache's secrets), read-only without them."""
    if not url.startswith(("http://", "https://")):
        console.print(f"[yellow]warning:[/] compile cache remote {redact(url)}: sccache is wired "
                      "for an http(s) WebDAV remote only; using the local compile cache only")
        return cc
    why = probe_remote(url, timeout)
    if why is not None:
        console.print(f"[yellow]warning:[/] compile cache remote {redact(url)} "
                      f"unreachable ({why}); using the local compile cache only")
        return cc
    creds = Credentials.from_env()
    env: dict[str, str] = {}
    if creds.token:
        env["SCCACHE_WEBDAV_TOKEN"] = creds.token
    elif creds.user and creds.password:
        env.update(SCCACHE_WEBDAV_USERNAME=creds.user, SCCACHE_WEBDAV_PASSWORD=creds.password)
    if not creds.present():
        env["SCCACHE_WEBDAV_RW_MODE"] = "READ_ONLY"
    return replace(cc, remote=url, sccache_remote_env=tuple(sorted(env.items())))
