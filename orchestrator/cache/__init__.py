"""The shared artifact cache: the store's second source of artifacts and toolchains.

signing.py (ed25519 keys), cache_toml.py (cache.toml + env secrets), backend.py / http.py /
file.py (where blobs and records live), transfer.py (moving blobs), push.py / pull.py
(artifacts, records in model/cache_record.py), toolchain_push.py / toolchain_pull.py
(materialized toolchains, records in toolchain_record.py), toolchain_hook.py (what
ensure_toolchain is given). Loaded lazily: importing the light toolchain_hook must not pull
in the transfer stack.
"""
from __future__ import annotations

from typing import Any

__all__ = ["substitute"]


def __getattr__(name: str) -> Any:
    if name == "substitute":
        from orchestrator.cache.pull import substitute
        return substitute
    raise AttributeError(name)
