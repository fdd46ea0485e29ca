"""Whether a workspace's IDE files are managed (`doit vscode` wrote them): its own module,
so the switch's fast path (plan_memo) can ask without importing the renderers."""
from __future__ import annotations

from pathlib import Path

STATE_FILE = "ide.json"               # <ws>/.orch/ide.json: IDE files are managed here


def is_managed(workspace: Path) -> bool:
    """True once `doit vscode` has written this workspace's IDE files."""
    return (workspace / ".orch" / STATE_FILE).is_file() and (workspace / ".vscode").is_dir()
