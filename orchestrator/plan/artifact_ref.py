"""What an artifact id on the command line names (`id=`, `doit why A B`): the one rule.

All 40 hex digits name an artifact whether or not it is stored (pull fetches one that is
not); a shorter prefix of at least MIN_PREFIX hex digits must match exactly one entry of the
store. Anything else is bad input, one line, exit 2. Used by verify, push, pull and why."""
from __future__ import annotations

import re
from pathlib import Path

from orchestrator.config.settings import Settings
from orchestrator.errors import UserError
from orchestrator.plan.derivation import make_plan
from orchestrator.store.artifacts import Store

MIN_PREFIX = 6
ID_LENGTH = 40
_HEX = re.compile(r"[0-9a-f]+")


def resolve_id(store: Store, wanted: str, label: str = "id=") -> tuple[str, Path | None]:
    """(full artifact id, its store path or None) for `wanted`; label prefixes the message
    (`id=`, `why: `)."""
    w = wanted.strip().lower()
    shown = wanted[:80]
    if not _HEX.fullmatch(w) or not MIN_PREFIX <= len(w) <= ID_LENGTH:
        raise UserError(f"{label}{shown!r} is not an artifact id: give its {ID_LENGTH} lowercase "
                        f"hex digits, or at least {MIN_PREFIX} of one in the store "
                        "(see `doit status`)")
    if len(w) == ID_LENGTH:
        return w, store.find(w)
    matches = [p for p in store.artifacts() if p.name.startswith(w)]
    if len(matches) != 1:
        what = "no artifact" if not matches else f"{len(matches)} artifacts"
        raise UserError(f"{label}{shown}: {what} in {store.store_dir} match; give more digits of "
                        f"one listed by `doit status` (or all {ID_LENGTH})")
    return matches[0].name[:ID_LENGTH], matches[0]


def find_stored(store: Store, wanted: str, label: str = "id=") -> Path:
    """The stored artifact `wanted` names (a full id not in the store is bad input too)."""
    artifact_id, path = resolve_id(store, wanted, label)
    if path is None:
        raise UserError(f"{label}{artifact_id}: not in {store.store_dir}; `doit pull "
                        f"id={artifact_id}` fetches it from the substituters")
    return path


def named_artifact(settings: Settings, store: Store) -> tuple[str, str, Path | None]:
    """(artifact id, display name, store path or None) for id=, or else recipe=/variant=.

    recipe/variant go through make_plan, the path `doit plan` takes (the machine check
    stat-cached): the id is a digest of the source and the lock, so naming the artifact
    without it would name a stale build."""
    wanted = settings.vars.get("id", "").strip()
    if wanted:
        artifact_id, path = resolve_id(store, wanted)
        return artifact_id, path.name if path else artifact_id, path
    plan = make_plan(settings, store)
    return plan.artifact_id, plan.name, store.find(plan.artifact_id)
