"""VS Code's variable substitution, to run a generated configuration outside VS Code."""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator.errors import UserError

_VAR = re.compile(r"\$\{(workspaceFolder|file|env:([A-Za-z_][A-Za-z0-9_]*))\}")


def resolve_variables(obj: Any, workspace: Path, file: Path | None = None,
                      env: Mapping[str, str] | None = None) -> Any:
    """obj with ${workspaceFolder}, ${file} and ${env:NAME} replaced, as VS Code does."""
    environ = os.environ if env is None else env

    def sub(m: re.Match[str]) -> str:
        if m.group(1) == "workspaceFolder":
            return str(workspace)
        if m.group(1) == "file":
            if file is None:
                raise UserError("the configuration uses ${file}; pass the script to debug")
            return str(file)
        return environ.get(m.group(2) or "", "")
    if isinstance(obj, str):
        return _VAR.sub(sub, obj)
    if isinstance(obj, list):
        return [resolve_variables(x, workspace, file, env) for x in obj]
    if isinstance(obj, dict):
        return {k: resolve_variables(v, workspace, file, env) for k, v in obj.items()}
    return obj
