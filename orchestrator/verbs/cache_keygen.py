"""`doit cache-keygen name=...`: write an ed25519 key pair outside the repository and print the
public key line for cache.toml's trusted-keys."""
from __future__ import annotations

from typing import Any

from orchestrator.cache.signing import default_key_dir, write_key_pair
from orchestrator.config.settings import Settings
from orchestrator.console import console
from orchestrator.errors import UserError
from orchestrator.verbs.output import emit


def cmd_keygen(settings: Settings) -> dict[str, Any]:
    name = settings.vars.get("name", "").strip()
    if not name:
        raise UserError("cache-keygen needs a key name: doit cache-keygen name=team-1")
    secret, public = write_key_pair(name, default_key_dir(), repo_root=settings.repo_root)
    console.print(f"secret key written to {secret} (keep it private; pushers set "
                  f"ORCH_CACHE_SIGNING_KEY={secret})")
    console.print("add this line to trusted-keys in cache.toml:")
    result = {"secret_key_file": str(secret), "public_key": public}
    if settings.fmt != "json":
        print(public)  # stdout: the line to paste
    emit(settings, result)
    return result
