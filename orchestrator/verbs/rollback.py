"""`doit rollback`: return the workspace's profile to the previous generation whose artifact
differs from the active one (generations of the same artifact are skipped, and named)."""
from __future__ import annotations

from orchestrator.config.settings import Settings
from orchestrator.ide.render import refresh_if_managed
from orchestrator.verbs.output import emit
from orchestrator.workspace.profiles import Workspace


def cmd_rollback(settings: Settings) -> None:
    ws = Workspace(settings.workspace)
    gen, skipped = ws.rollback()
    target = ws.current()
    refresh_if_managed(settings)  # F5 builds/debugs the now-active artifact, not the old one
    same = (f" (skipped generation{'s' if len(skipped) > 1 else ''} "
            f"{', '.join(map(str, skipped))}: the same artifact as the active one)" if skipped else "")
    emit(settings, {"generation": gen, "path": str(target), "skipped": skipped},
         f"rolled back: {settings.workspace} generation {gen} → {target.name if target else '?'}{same}")
