"""What `doit plan` and `doit why` report (their verbs: orchestrator.verbs.plan, .why).

plan: the id, the derivation, the lock entries used, and what `doit build` would do now —
`present` (in the store), `substitutable` (a substituter answers HEAD for its record; nothing
is downloaded) or `build`. Nothing is built and no toolchain is materialized.

why: the dotted-path difference of two derivations, e.g. `variant.cflags: + -Og`; lists are
shown as +/- items. The sides are two stored artifacts (`doit why A B`, ids or prefixes of at
least 6 hex digits) or two variable sets planned like `doit plan` (`doit why variant=release
variant2=debug`; the verb: orchestrator.verbs.why).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from orchestrator.config.settings import Settings
from orchestrator.plan.derivation import Plan
from orchestrator.store.artifacts import Store


# -- plan ---------------------------------------------------------------------------------
def head_substituters(settings: Settings, artifact_id: str) -> tuple[str | None, list[str]]:
    """The first substituter whose record for artifact_id answers HEAD, and warnings for those
    that could not be asked (down, refused: the build would then fall back to building)."""
    from orchestrator.cache.backend import record_key
    from orchestrator.cache.backends import open_backend
    from orchestrator.cache.cache_toml import load_config
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
