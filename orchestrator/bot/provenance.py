"""Where a night ran: the repository's commit, branch and tree, and the host."""
from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path
from typing import Any

# A CI engine checks out a detached HEAD; these name the branch it built.
BRANCH_ENV = ("ORCH_NIGHTLY_BRANCH", "GITHUB_REF_NAME", "BUILDBOT_BRANCH")


def _git(root: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else None


def repo_state(root: Path) -> dict[str, Any] | None:
    """{commit, branch, tree, dirty} of the repository at root, None outside a git work tree."""
    commit = _git(root, "rev-parse", "--verify", "-q", "HEAD")
    if commit is None:
        return None
    branch = _git(root, "symbolic-ref", "-q", "--short", "HEAD")
    branch = branch or next((os.environ[k] for k in BRANCH_ENV if os.environ.get(k)), None)
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "branch": branch, "tree": _git(root, "rev-parse", "HEAD^{tree}"),
            "dirty": bool(status)}


def host() -> str:
    return socket.gethostname()
