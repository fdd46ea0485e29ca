"""`doit plan`: what recipe/variant/source/targets resolve to (id, derivation, lock entries) and
what `doit build` would do now; nothing is built (the report: orchestrator.realise.explain)."""
from __future__ import annotations

from typing import Any

from orchestrator.config.settings import Settings
from orchestrator.hashing import pretty_json
from orchestrator.plan.derivation import make_plan
from orchestrator.realise.explain import plan_report
from orchestrator.store.artifacts import Store
from orchestrator.verbs.output import emit


def render_plan(r: dict[str, Any], derivation: bool = False) -> str:
    """The short summary (id, what build would do, the lock entries); derivation=True adds
    the derivation's JSON, which format=json always carries."""
    doing = {"present": f"present: {r['path']}",
             "substitutable": f"substitutable from {r['substituter']}",
             "build": "build (not in the store, no substituter has it)"}[r["action"]]
    lines = [f"{r['recipe']} {r['variant']} {r['id']}", f"  build would: {doing}",
             "  lock entries used:"]
    lines += [f"    {k:<20} {e['version'] or '':<12} {e['digest'][:16]}"
              for k, e in r["inputs"].items()]
    lines += [f"  warning: {w}" for w in r["warnings"]]
    if derivation:
        lines.append("  derivation:")
        lines += [f"    {line}" for line in pretty_json(r["derivation"]).splitlines()]
    else:
        lines.append("  (derivation=1 prints the derivation; format=json the whole plan)")
    return "\n".join(lines)


def cmd_plan(settings: Settings) -> dict[str, Any]:
    """Print what recipe/variant/source/targets resolve to, and what build would do."""
    store = Store(settings.store_root)
    report = plan_report(settings, store, make_plan(settings, store))
    human = render_plan(report, settings.flag("derivation")) if settings.fmt != "json" else None
    emit(settings, report, human, markup=False)
    return report
