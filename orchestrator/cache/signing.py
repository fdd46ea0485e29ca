"""ed25519 keys (PyNaCl) for cache records: key files, trusted keys, sign and verify.

Key lines look like Nix's: `<name>:<base64 of 32 bytes>`; the public line goes into
cache.toml's `trusted-keys`, the secret one stays in a 0600 file outside the repository
(`doit cache-keygen name=...`), found through ORCH_CACHE_SIGNING_KEY when pushing.
"""
from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

from orchestrator.cache.errors import CacheError
from orchestrator.errors import UserError
from orchestrator.hashing import canonical_json

SIGNING_KEY_ENV = "ORCH_CACHE_SIGNING_KEY"
KEY_DIR_ENV = "ORCH_CACHE_KEY_DIR"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def _split(line: str, what: str) -> tuple[str, bytes]:
    name, sep, b64 = line.strip().partition(":")
    if not sep or not NAME_RE.match(name):
        raise UserError(f"{what}: expected '<name>:<base64 key>', got {line.strip()[:40]!r}")
    try:
        raw = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise UserError(f"{what}: key of {name!r} is not valid base64") from None
    if len(raw) != 32:
        raise UserError(f"{what}: key of {name!r} has {len(raw)} bytes, expected 32")
    return name, raw


@dataclass(frozen=True)
class PublicKey:
    name: str
    key: VerifyKey

    @classmethod
    def parse(cls, line: str, where: str = "trusted key") -> PublicKey:
        name, raw = _split(line, where)
        return cls(name, VerifyKey(raw))

    def line(self) -> str:
        return f"{self.name}:{base64.b64encode(bytes(self.key)).decode()}"


@dataclass(frozen=True)
class SecretKey:
    name: str
    key: SigningKey

    @classmethod
    def parse(cls, line: str, where: str = "signing key") -> SecretKey:
        name, raw = _split(line, where)
        return cls(name, SigningKey(raw))

    @classmethod
    def generate(cls, name: str) -> SecretKey:
        if not NAME_RE.match(name):
            raise UserError(f"key name {name!r}: use letters, digits, '.', '_' or '-' (max 64)")
        return cls(name, SigningKey.generate())

    def line(self) -> str:
        return f"{self.name}:{base64.b64encode(bytes(self.key)).decode()}"

    @property
    def public(self) -> PublicKey:
        return PublicKey(self.name, self.key.verify_key)

    def sign(self, payload: Mapping[str, Any]) -> dict[str, str]:
        """The `signature` field for a record whose other fields are `payload`."""
        sig = self.key.sign(canonical_json(dict(payload))).signature
        return {"key": self.name, "sig": base64.b64encode(sig).decode()}


def default_key_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(os.environ.get(KEY_DIR_ENV) or Path(base) / "orchestrator" / "keys")


def load_signing_key(env: Mapping[str, str] | None = None) -> SecretKey:
    """The pusher's secret key from ORCH_CACHE_SIGNING_KEY (a key file, or the key line)."""
    env = os.environ if env is None else env
    value = env.get(SIGNING_KEY_ENV, "").strip()
    if not value:
        raise UserError(f"push needs a signing key: set {SIGNING_KEY_ENV} to the secret key file "
                        "written by `doit cache-keygen name=<name>`")
    path = Path(value).expanduser()
    if path.is_file():
        try:
            return SecretKey.parse(path.read_text(), f"{SIGNING_KEY_ENV}={path}")
        except OSError as e:
            raise UserError(f"{SIGNING_KEY_ENV}={path}: cannot read ({e.strerror})") from None
    if ":" in value and "/" not in value.partition(":")[0]:
        return SecretKey.parse(value, SIGNING_KEY_ENV)
    raise UserError(f"{SIGNING_KEY_ENV}={value}: no such key file")


def write_key_pair(name: str, directory: Path, repo_root: Path | None = None) -> tuple[Path, str]:
    """Create `<dir>/<name>.secret` (0600) and `.public`; return the secret path and public line."""
    directory = directory.expanduser().absolute()
    if repo_root is not None and directory.is_relative_to(repo_root.absolute()):
        raise UserError(f"key dir {directory} is inside the repository; keep secret keys outside "
                        f"it (set {KEY_DIR_ENV})")
    secret = SecretKey.generate(name)
    secret_path = directory / f"{name}.secret"
    if secret_path.exists():
        raise UserError(f"{secret_path} already exists; pick another name or remove it first")
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(secret_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret.line() + "\n")
    public = secret.public.line()
    (directory / f"{name}.public").write_text(public + "\n")
    return secret_path, public


class TrustedKeys:
    """The public keys a record may be signed with (cache.toml `trusted-keys`)."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.keys: dict[str, VerifyKey] = {}
        for line in lines:
            k = PublicKey.parse(line, "cache.toml trusted-keys")
            self.keys[k.name] = k.key

    def verify(self, doc: Mapping[str, Any], where: str) -> str:
        """Check a record's signature over all its other fields; return the key name."""
        sig = doc.get("signature")
        if not isinstance(sig, dict) or not sig.get("sig"):
            raise CacheError(f"refused {where}: the record is unsigned")
        name = str(sig.get("key", ""))
        key = self.keys.get(name)
        if key is None:
            raise CacheError(f"refused {where}: signed by untrusted key {name!r} (trust it by adding "
                             "its public key to trusted-keys in cache.toml)")
        payload = {k: v for k, v in doc.items() if k != "signature"}
        try:
            key.verify(canonical_json(payload), base64.b64decode(str(sig["sig"]), validate=True))
        except (BadSignatureError, binascii.Error, ValueError):
            raise CacheError(f"refused {where}: bad signature for key {name!r} "
                             "(record tampered with or corrupted)") from None
        return name
