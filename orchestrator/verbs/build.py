"""`doit build`: realise recipe/variant into the store (present, substituted or built)."""
from __future__ import annotations

import time

from orchestrator.config.settings import Settings
from orchestrator.console import print_total
from orchestrator.memo.plan_memo import remember
from orchestrator.realise.pipeline import Realised, realise
from orchestrator.store.artifacts import Store
from orchestrator.verbs.output import emit
from orchestrator.verbs.replies import build_reply


def cmd_build(settings: Settings) -> Realised:
    t0 = time.monotonic()
    r = realise(settings, Store(settings.store_root))
    data, msg = build_reply(r.plan.recipe.name, r.plan.variant_name, r.plan.artifact_id,
                            str(r.path), r.origin, time.monotonic() - t0)
    if r.comparison is not None:  # rebuild=1 / check=1
        data["comparison"] = r.comparison
        same = "identical to" if r.comparison["identical"] else "differs from"
        msg += f"; {r.comparison['mode']}: the new build {same} the store"
    emit(settings, data, msg, markup=False)
    if r.comparison is None:
        remember(r)  # the next no-op build of this command: answered by plan_memo.answer
    if r.origin != "present":
        print_total(time.monotonic() - t0)
    return r
