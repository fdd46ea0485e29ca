"""VS Code's JSON files: JSON with comments and trailing commas, read into objects and
merged so that the user's entries are kept and ours (named `orch: ...`) replaced."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from orchestrator.errors import UserError

OURS = "orch: "                       # name prefix of generated configurations and tasks

_JSON_STRING = r'"(?:\\.|[^"\\])*"'
_JSONC_COMMENT = re.compile(_JSON_STRING + r'|//[^\n]*|/\*.*?\*/', re.S)
_JSONC_TRAILING_COMMA = re.compile(_JSON_STRING + r'|,(?=\s*[\]}])')


def loads_jsonc(text: str, path: Path) -> Any:
    """Parse JSON that may hold // and /* */ comments and trailing commas (as VS Code does)."""
    def keep(m: re.Match[str]) -> str:
        tok = m.group(0)
        return tok if tok.startswith('"') else ""
    plain = _JSONC_TRAILING_COMMA.sub(keep, _JSONC_COMMENT.sub(keep, text))
    try:
        return json.loads(plain) if plain.strip() else {}
    except json.JSONDecodeError as e:
        raise UserError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}); fix or remove the "
                        "file, then run `doit vscode` again") from None


def read_json(path: Path) -> dict[str, Any]:
    """A VS Code JSON file's top-level object ({} when the file is absent)."""
    if not path.is_file():
        return {}
    data = loads_jsonc(path.read_text(), path)
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object at the top; fix or remove the file")
    return data


def merge_named(existing: list[Any], ours: list[dict[str, Any]], key: str,
                path: Path) -> list[Any]:
    """The user's entries (any name not starting with 'orch: ') in their order, then ours."""
    if not isinstance(existing, list):
        raise UserError(f"{path}: expected a list of objects; fix or remove the file")
    kept = [e for e in existing if not (isinstance(e, dict) and
                                        str(e.get(key, "")).startswith(OURS))]
    return [*kept, *ours]


def dump_json(obj: Any) -> str:
    """obj as the files are written: 2-space indent, a final newline."""
    return json.dumps(obj, indent=2) + "\n"
