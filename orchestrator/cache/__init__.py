"""The shared artifact cache: the store's second source of artifacts (the substituter).

signing.py (ed25519 keys), config.py (cache.toml + env secrets), backend.py / http.py /
file.py (where blobs and records live), transfer.py (moving blobs), and in model/
cache_record.py the signed per-artifact record.
"""
from __future__ import annotations

from orchestrator.cache.pull import substitute

__all__ = ["substitute"]
