"""The variables that name one artifact on the command line (recipe, variant, targets,
source), so every hint and generated task repeats exactly what selects it: a hint that
dropped targets= or source= would start a different, full build."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.model.manifest import Manifest
    from orchestrator.plan.derivation import Plan


def extra_vars(plan: Plan) -> list[str]:
    """targets= and source= of this plan (empty for a full build of the pinned source)."""
    out = [f"targets={','.join(plan.variant.targets)}"] if plan.variant.targets else []
    if plan.source.extra.get("checkout"):
        out.append(f"source={plan.source_dir}")
    return out


def selection_vars(plan: Plan) -> list[str]:
    return [f"recipe={plan.recipe.name}", f"variant={plan.variant_name}", *extra_vars(plan)]


def command_for(verb: str, plan: Plan) -> str:
    """`doit <verb> recipe=... variant=... [targets=...] [source=...]`."""
    return " ".join(["doit", verb, *selection_vars(plan)])


def manifest_selection(manifest: Manifest, workspace: Path) -> dict[str, str]:
    """The variables that rebuild a stored artifact besides recipe/variant: its targets, and
    for a checkout build, the checkout (the workspace its links live in)."""
    out: dict[str, str] = {}
    targets = manifest.derivation.get("variant", {}).get("targets") or []
    if targets:
        out["targets"] = ",".join(targets)
    if manifest.derivation.get("source", {}).get("kind") == "git-checkout":
        out["source"] = str(workspace)
    return out
