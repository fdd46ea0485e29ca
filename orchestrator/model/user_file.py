"""The one place user-written TOML/JSON files are read: every failure is one UserError line.

Covers what a hand-edited or hostile file can do to the parsers: unreadable (a directory,
no permission), not UTF-8, malformed, or nested so deeply that a recursive reader (tomllib,
json, pydantic) would overflow the stack.
"""
from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from orchestrator.errors import UserError

# Deeper than any real recipe, lock, cache.toml or nightly.toml; far below the stack limit.
MAX_DEPTH = 64
# A user file is read whole; anything larger is not a hand-written config.
MAX_BYTES = 64 * 1024 * 1024


def depth_ok(obj: Any, limit: int = MAX_DEPTH) -> bool:
    """True when obj's containers nest at most `limit` levels (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(obj, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = list(item.values())
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= limit:
            return False
        stack.extend((c, depth + 1) for c in children)
    return True


def read_text(path: Path, fix: str) -> str:
    """The file's text; unreadable or not UTF-8 is a UserError ending in `fix`."""
    try:
        raw = path.read_bytes()[:MAX_BYTES + 1]
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror or e}); {fix}") from None
    if len(raw) > MAX_BYTES:
        raise UserError(f"{path}: larger than {MAX_BYTES // 2**20} MiB; {fix}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 (byte {e.start}); {fix}") from None


def _checked(path: Path, data: Any, fix: str) -> Any:
    if not depth_ok(data):
        raise UserError(f"{path}: nested deeper than {MAX_DEPTH} levels; {fix}")
    return data


def read_toml(path: Path, fix: str) -> dict[str, Any]:
    """Parse a user's TOML file (see module doc); `fix` says what to do, e.g. 'fix the file'."""
    text = read_text(path, fix)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{path}: malformed TOML: {e}; {fix}") from None
    except RecursionError:
        raise UserError(f"{path}: nested too deeply to read; {fix}") from None
    checked: dict[str, Any] = _checked(path, data, fix)
    return checked


def read_json(path: Path, fix: str) -> Any:
    """Parse a JSON file a user may have edited (locks); same failures as read_toml."""
    text = read_text(path, fix)
    try:
        data = json.loads(text)
    except RecursionError:
        raise UserError(f"{path}: nested too deeply to read; {fix}") from None
    except ValueError as e:
        raise UserError(f"{path}: malformed JSON: {e}; {fix}") from None
    return _checked(path, data, fix)
