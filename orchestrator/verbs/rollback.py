"""`doit rollback`: return the workspace's profile to the previous generation."""
from __future__ import annotations

from orchestrator.ide.render import refresh_if_managed
from orchestrator.settings import Settings
from orchestrator.verbs.output import emit
from orchestrator.workspace import Workspace


def cmd_rollback(settings: Settings) -> None:
    ws = Workspace(settings.workspace)
    gen = ws.rollback()
    target = ws.current()
    refresh_if_managed(settings)  # F5 builds/debugs the now-active artifact, not the old one
    emit(settings, {"generation": gen, "path": str(target)},
         f"rolled back: {settings.workspace} generation {gen} → {target.name if target else '?'}")
