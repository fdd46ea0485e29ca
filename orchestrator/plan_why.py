"""`doit plan` and `doit why`: what an artifact id is made of, and why two ids differ.

plan: the id, the derivation, the lock entries used, and what `doit build` would do now —
`present` (in the store), `substitutable` (a substituter answers HEAD for its record; nothing
is downloaded) or `build`. Nothing is built and no toolchain is materialized.

why A B: the dotted-path difference of two stored artifacts' derivations (ids or prefixes of
at least 6 hex digits), e.g. `variant.cflags: + -Og`; lists are shown as +/- items.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from orchestrator.console import console
from orchestrator.errors import UserError
from orchestrator.hashing import pretty_json
from orchestrator.plan import Plan, make_plan
from orchestrator.settings import Settings
from orchestrator.store import Store

MIN_PREFIX = 6


# -- plan ---------------------------------------------------------------------------------
def head_substituters(settings: Settings, artifact_id: str) -> tuple[str | None, list[str]]:
    """The first substituter whose record for artifact_id answers HEAD, and warnings for those
    that could not be asked (down, refused: the build would then fall back to building)."""
    from orchestrator.cache.backend import open_backend, record_key
    from orchestrator.cache.config import load_config
    from orchestrator.cache.errors import CacheError

    config = load_config(settings.repo_root)
    warnings: list[str] = []
    for url in config.substituters:
        try:
            backend = open_backend(url, config)
        except CacheError as e:
            warnings.append(str(e))
            continue
        try:
            if backend.exists(record_key(artifact_id)):
                return url, warnings
        except CacheError as e:
            warnings.append(str(e))
        finally:
            backend.close()
    return None, warnings


def plan_report(settings: Settings, store: Store, plan: Plan) -> dict[str, Any]:
    found = store.find(plan.artifact_id)
    substituter, warnings = (None, [])
    if found is None and settings.substitute:
        substituter, warnings = head_substituters(settings, plan.artifact_id)
    action = "present" if found else "substitutable" if substituter else "build"
    return {
        "id": plan.artifact_id, "name": plan.name, "recipe": plan.recipe.name,
        "variant": plan.variant_name, "action": action,
        "path": str(found) if found else None, "substituter": substituter,
        "warnings": warnings,
        "inputs": {k: {"kind": e.kind, "name": e.name, "version": getattr(e, "version", None),
                       "digest": e.digest()} for k, e in sorted(plan.inputs.items())},
        "derivation": plan.derivation,
    }


def render_plan(r: dict[str, Any]) -> str:
    doing = {"present": f"present: {r['path']}",
             "substitutable": f"substitutable from {r['substituter']}",
             "build": "build (not in the store, no substituter has it)"}[r["action"]]
    lines = [f"{r['recipe']} {r['variant']} {r['id']}", f"  build would: {doing}",
             "  lock entries used:"]
    lines += [f"    {k:<20} {e['version'] or '':<12} {e['digest'][:16]}"
              for k, e in r["inputs"].items()]
    lines += [f"  warning: {w}" for w in r["warnings"]]
    lines.append("  derivation:")
    lines += [f"    {line}" for line in pretty_json(r["derivation"]).splitlines()]
    return "\n".join(lines)


def cmd_plan(settings: Settings) -> dict[str, Any]:
    """Print what recipe/variant/source/targets resolve to, and what build would do."""
    store = Store(settings.store_root)
    report = plan_report(settings, store, make_plan(settings, store))
    if settings.fmt == "json":
        print(json.dumps(report, sort_keys=True))
    else:
        console.print(render_plan(report), markup=False)
    return report


# -- why ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Change:
    path: str                       # dotted path in the derivation
    op: Literal["+", "-", "~"]      # added, removed, changed
    old: Any = None
    new: Any = None

    def line(self) -> str:
        if self.op == "+":
            return f"{self.path}: + {show(self.new)}"
        if self.op == "-":
            return f"{self.path}: - {show(self.old)}"
        return f"{self.path}: {show(self.old)} → {show(self.new)}"


def show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def derivation_diff(a: Any, b: Any, path: str = "") -> list[Change]:
    """a → b as dotted-path changes; lists give one +/- per item (a reorder is one ~)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[Change] = []
        for k in sorted(set(a) | set(b)):
            p = f"{path}.{k}" if path else str(k)
            if k not in a:
                out += derivation_diff_added(p, b[k])
            elif k not in b:
                out.append(Change(p, "-", old=a[k]))
            else:
                out += derivation_diff(a[k], b[k], p)
        return out
    if isinstance(a, list) and isinstance(b, list):
        removed = [x for x in a if x not in b]
        added = [x for x in b if x not in a]
        if not removed and not added and a != b:
            return [Change(path, "~", old=a, new=b)]
        return [Change(path, "-", old=x) for x in removed] + [Change(path, "+", new=x) for x in added]
    return [] if a == b else [Change(path, "~", old=a, new=b)]


def derivation_diff_added(path: str, value: Any) -> list[Change]:
    if isinstance(value, list):
        return [Change(path, "+", new=x) for x in value]
    return [Change(path, "+", new=value)]


def find_artifact(store: Store, wanted: str) -> Path:
    """The one stored artifact whose id starts with `wanted` (at least 6 hex digits)."""
    w = wanted.lower()
    if len(w) < MIN_PREFIX or any(c not in "0123456789abcdef" for c in w):
        raise UserError(f"why: {wanted!r} is not an artifact id; give at least {MIN_PREFIX} hex "
                        "digits of one (see `doit status`)")
    matches = [p for p in store.artifacts() if p.name.startswith(w)]
    if len(matches) != 1:
        what = "no artifact" if not matches else f"{len(matches)} artifacts"
        raise UserError(f"why: {what} in {store.store_dir} match {wanted!r}; give more digits of "
                        "one listed by `doit status`")
    return matches[0]


def cmd_why(settings: Settings, ids: list[str]) -> dict[str, Any]:
    """Print the derivation difference between two stored artifacts: doit why A B."""
    if len(ids) != 2:
        raise UserError(f"why: give two artifact ids (doit why A B), got {len(ids)}")
    store = Store(settings.store_root)
    a, b = (Store.read_manifest(find_artifact(store, x)) for x in ids)
    changes = derivation_diff(a.derivation, b.derivation)
    report = {"a": a.id, "b": b.id, "a_name": a.name, "b_name": b.name,
              "changes": [asdict(c) for c in changes]}
    if settings.fmt == "json":
        print(json.dumps(report, sort_keys=True))
    else:
        head = f"{a.name} → {b.name}: " + (f"{len(changes)} difference(s)" if changes
                                            else "same derivation")
        console.print("\n".join([head, *(f"  {c.line()}" for c in changes)]), markup=False)
    return report
