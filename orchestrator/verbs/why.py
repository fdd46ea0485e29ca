"""`doit why A B`: the derivation difference between two stored artifacts (each named by the
id= rule of orchestrator.artifact_ref; the diff: orchestrator.plan_why)."""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

from orchestrator.artifact_ref import find_stored
from orchestrator.errors import UserError
from orchestrator.plan_why import derivation_diff
from orchestrator.settings import Settings
from orchestrator.store import Store
from orchestrator.verbs.output import emit


def cmd_why(settings: Settings, ids: list[str]) -> dict[str, Any]:
    """Print the derivation difference between two stored artifacts: doit why A B."""
    if len(ids) != 2:
        raise UserError(f"why: give two artifact ids (doit why A B), got {len(ids)}")
    store = Store(settings.store_root)
    a, b = (Store.read_manifest(find_stored(store, x, label="why: ")) for x in ids)
    changes = derivation_diff(a.derivation, b.derivation)
    report = {"a": a.id, "b": b.id, "a_name": a.name, "b_name": b.name,
              "changes": [asdict(c) for c in changes]}
    head = f"{a.name} → {b.name}: " + (f"{len(changes)} difference(s)" if changes
                                        else "same derivation")
    emit(settings, report, "\n".join([head, *(f"  {c.line()}" for c in changes)]), markup=False)
    return report
