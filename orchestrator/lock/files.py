"""Reading and writing locks/<name>.toml (spec) and locks/<name>.lock.json (the lock)."""
from __future__ import annotations

import re
from pathlib import Path

from pydantic import ValidationError

from orchestrator.errors import UserError
from orchestrator.fs import write_atomic
from orchestrator.hashing import pretty_json, sha256_bytes
from orchestrator.memo.file_reads import note_path
from orchestrator.model.lock import Lock, LockSpec
from orchestrator.model.recipe import NAME_RE, describe_validation_error
from orchestrator.model.user_file import read_json, read_toml


def check_lock_name(name: str) -> str:
    if not re.match(NAME_RE, name):
        raise UserError(f"lock name {name[:80]!r} is not valid: use lower-case letters, digits, "
                        "'-', '_', '.' (at most 100)")
    return name


def spec_path(locks_dir: Path, name: str) -> Path:
    return locks_dir / f"{check_lock_name(name)}.toml"


def lock_path(locks_dir: Path, name: str) -> Path:
    return locks_dir / f"{check_lock_name(name)}.lock.json"


def load_spec(locks_dir: Path, name: str) -> tuple[LockSpec, str]:
    """The spec and the sha256 of its bytes (the lock records it to detect a stale lock)."""
    path = spec_path(locks_dir, name)
    if not path.is_file():
        raise UserError(f"no lock spec {path}; create it or pass lock=<name> of an existing one")
    data = read_toml(path, "fix the spec")
    try:
        return LockSpec.model_validate(data), sha256_bytes(path.read_bytes())
    except ValidationError as e:
        raise UserError(f"{path}: {describe_validation_error(e)}; fix the spec") from None


def load_lock(locks_dir: Path, name: str) -> Lock:
    path = lock_path(locks_dir, name)
    if not path.is_file():
        raise UserError(f"no lock file {path}; run `doit lock` to write it")
    data = read_json(path, "run `doit lock` to rewrite it")
    try:
        lock = Lock.model_validate(data)
    except ValidationError as e:
        raise UserError(f"{path}: {describe_validation_error(e)}; run `doit lock` to rewrite it") from None
    sp = spec_path(locks_dir, name)
    note_path(sp)  # a plan memo: a spec written later counts
    if sp.is_file() and sha256_bytes(sp.read_bytes()) != lock.spec_sha256:
        raise UserError(f"{path} is stale: {sp} changed since it was written; run `doit lock`")
    return lock


def render_lock(lock: Lock) -> str:
    return pretty_json(lock.model_dump(mode="json"))


def save_lock(locks_dir: Path, lock: Lock) -> Path:
    path = lock_path(locks_dir, lock.name)
    write_atomic(path, render_lock(lock))
    return path
