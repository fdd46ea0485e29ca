"""Links an artifact asks for inside the workspace (a PyTorch checkout's torch/lib/*.so, _C).

A builder lists them in `meta/workspace-links.json` as {path in workspace: path in artifact}.
Each link points through `.orch/profile`, so a later switch or rollback needs no rewrite:
the profile rename is the one atomic step. A link is made only where its parent directory
already exists in the workspace (so a pinned-source build switched into an unrelated
workspace adds nothing), and never over a real file.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from orchestrator.errors import UserError
from orchestrator.fs import atomic_symlink, is_stale_temp, write_atomic

LINKS_META = "meta/workspace-links.json"
STATE = "workspace-links.json"


def wanted_links(artifact: Path) -> dict[str, str]:
    f = artifact / LINKS_META
    return json.loads(f.read_text())["links"] if f.is_file() else {}


def _points_into_profile(link: Path, orch: Path) -> bool:
    if not link.is_symlink():
        return False
    target = (link.parent / os.readlink(link)).absolute()
    return os.path.normpath(target).startswith(str(orch / "profile") + os.sep)


def apply_links(root: Path, orch: Path, artifact: Path) -> list[str]:
    """Create/refresh the artifact's links (before the profile flips); returns those made."""
    made = []
    todo = {rel: target for rel, target in sorted(wanted_links(artifact).items())
            if (root / rel).parent.is_dir()}
    for rel in todo:  # refuse before changing anything
        link = root / rel
        if link.exists() and not link.is_symlink():
            raise UserError(f"{link} is a real file or directory (an earlier setup.py build?); "
                            "move it away so the workspace can link the active variant there")
    for rel, target in todo.items():
        link = root / rel
        dest = os.path.relpath(orch / "profile" / target, link.parent)
        if link.is_symlink() and os.readlink(link) == dest:
            made.append(rel)
            continue
        for stale in link.parent.glob(f".{link.name}.tmp-*"):  # left by a killed switch
            if is_stale_temp(stale.name):
                stale.unlink(missing_ok=True)
        atomic_symlink(dest, link)
        made.append(rel)
    return made


def prune_links(root: Path, orch: Path, keep: list[str]) -> None:
    """After the flip: drop links of the previous artifact that the new one does not have."""
    state = orch / STATE
    text = json.dumps(sorted(keep)) + "\n"
    before_text = state.read_text() if state.is_file() else None
    before = json.loads(before_text) if before_text is not None else []
    for rel in set(before) - set(keep):
        link = root / rel
        if _points_into_profile(link, orch):
            link.unlink()
    if text != before_text:  # unchanged (the usual switch): no write, no fsync
        write_atomic(state, text)
