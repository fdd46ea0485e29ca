"""Picking a cache backend by URL (http://, https://, file:// or oci://)."""
from __future__ import annotations

from orchestrator.cache.backend import Backend
from orchestrator.cache.cache_toml import CacheConfig, Credentials
from orchestrator.cache.errors import CacheError
from orchestrator.cache.file import FileBackend


def open_backend(url: str, config: CacheConfig, creds: Credentials | None = None) -> Backend:
    """The backend for `url` (http://, https://, file:// or oci://)."""
    if url.startswith(("http://", "https://")):
        from orchestrator.cache.http import HttpBackend  # here: its HTTP stack costs a file:// run
        return HttpBackend(url, config, creds or Credentials.from_env())
    if url.startswith("oci://"):
        from orchestrator.cache.oci import OciBackend  # here: as http's stack
        return OciBackend(url, config, creds or Credentials.from_env())
    if url.startswith("file://"):
        return FileBackend(url)
    raise CacheError(f"cache URL {url!r}: use http://, https://, file:// or oci://")
