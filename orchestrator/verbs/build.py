"""`doit build`: realise recipe/variant into the store (present, substituted or built)."""
from __future__ import annotations

import time

from orchestrator.config.settings import Settings
from orchestrator.console import print_total
from orchestrator.memo.plan_memo import remember
from orchestrator.realise.pipeline import Realised, realise
from orchestrator.store.artifacts import Store
from orchestrator.verbs.output import emit


def realised_line(r: Realised) -> str:
    """`<recipe> <variant> <id>: <origin> → <path>`, the line build prints."""
    return f"{r.plan.recipe.name} {r.plan.variant_name} {r.plan.artifact_id}: {r.origin} → {r.path}"


def cmd_build(settings: Settings) -> Realised:
    t0 = time.monotonic()
    r = realise(settings, Store(settings.store_root))
    if r.origin == "present":
        msg = f"up to date: {realised_line(r)} ({time.monotonic() - t0:.2f}s)"
    else:
        msg = realised_line(r)
    data = {"id": r.plan.artifact_id, "path": str(r.path), "origin": r.origin,
            "recipe": r.plan.recipe.name, "variant": r.plan.variant_name}
    if r.comparison is not None:  # rebuild=1 / check=1
        data["comparison"] = r.comparison
        same = "identical to" if r.comparison["identical"] else "differs from"
        msg += f"; {r.comparison['mode']}: the new build {same} the store"
    emit(settings, data, msg)
    if r.comparison is None:
        remember(r)  # the next no-op build of this command: answered by plan_memo.answer
    if r.origin != "present":
        print_total(time.monotonic() - t0)
    return r
