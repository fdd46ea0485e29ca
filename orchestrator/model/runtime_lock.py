"""`locks/runtime/<recipe>.lock.json`: a recipe's `[runtime] requires`, pinned by `doit lock`.

Pip resolves the requirements for the recipe's lock's interpreter, held to that lock's own
pins (so a runtime requirement never disagrees with the toolchain's torch); packages that
lock already installs in the toolchain's venv are left out (the profile's `python` is that
venv's). What it was resolved from is recorded, so a plan finds a stale file: the
requirements, the lock's name, its interpreter and its pypi pins.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from orchestrator.hashing import digest_of
from orchestrator.model.lock import SHA256, Lock, PypiEntry


class RuntimeLock(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: Literal[1] = 1
    recipe: str
    lock: str
    requires: list[str]
    # What the resolution depended on besides `requires` (see toolchain_basis).
    basis_sha256: SHA256
    entries: dict[str, PypiEntry]

    def digests(self) -> dict[str, str]:
        """Entry key -> digest: what the artifact id takes of the runtime pins."""
        return {k: e.digest() for k, e in sorted(self.entries.items())}


def toolchain_basis(lock: Lock) -> str:
    """The digest of what a runtime resolution depends on in the recipe's lock: its
    interpreter and its pypi pins (a new torch or python re-resolves the runtime lock)."""
    py = lock.entries.get("python")
    pins = sorted(f"{e.name}=={e.version}" for e in lock.entries.values() if isinstance(e, PypiEntry))
    return digest_of({"python": py.digest() if py is not None else None, "pypi": pins})
