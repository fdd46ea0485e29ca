"""Reading and writing locks/<name>.toml (spec) and locks/<name>.lock.json (the lock)."""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

from pydantic import ValidationError

from orchestrator.errors import UserError
from orchestrator.hashing import pretty_json, sha256_bytes
from orchestrator.model.lock import Lock, LockSpec
from orchestrator.model.recipe import describe_validation_error
from orchestrator.store import write_atomic


def spec_path(locks_dir: Path, name: str) -> Path:
    return locks_dir / f"{name}.toml"


def lock_path(locks_dir: Path, name: str) -> Path:
    return locks_dir / f"{name}.lock.json"


def load_spec(locks_dir: Path, name: str) -> tuple[LockSpec, str]:
    """The spec and the sha256 of its bytes (the lock records it to detect a stale lock)."""
    path = spec_path(locks_dir, name)
    if not path.is_file():
        raise UserError(f"no lock spec {path}; create it or pass lock=<name> of an existing one")
    raw = path.read_bytes()
    try:
        data = tomllib.loads(raw.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: malformed TOML: {e}; fix the file") from None
    try:
        return LockSpec.model_validate(data), sha256_bytes(raw)
    except ValidationError as e:
        raise UserError(f"{path}: {describe_validation_error(e)}; fix the spec") from None


def load_lock(locks_dir: Path, name: str) -> Lock:
    path = lock_path(locks_dir, name)
    if not path.is_file():
        raise UserError(f"no lock file {path}; run `doit lock` to write it")
    try:
        data = json.loads(path.read_text())
    except ValueError as e:
        raise UserError(f"{path}: malformed JSON: {e}; run `doit lock` to rewrite it") from None
    try:
        lock = Lock.model_validate(data)
    except ValidationError as e:
        raise UserError(f"{path}: {describe_validation_error(e)}; run `doit lock` to rewrite it") from None
    sp = spec_path(locks_dir, name)
    if sp.is_file() and sha256_bytes(sp.read_bytes()) != lock.spec_sha256:
        raise UserError(f"{path} is stale: {sp} changed since it was written; run `doit lock`")
    return lock


def render_lock(lock: Lock) -> str:
    return pretty_json(lock.model_dump(mode="json"))


def save_lock(locks_dir: Path, lock: Lock) -> Path:
    path = lock_path(locks_dir, lock.name)
    write_atomic(path, render_lock(lock))
    return path
