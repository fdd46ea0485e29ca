"""Verify rules are outside the artifact id: an artifact verified under other rules than the
recipe's current ones is verified again (read-only) before it is used.

Every build records the digest of the rules it was verified under in the manifest's
`verify.rules`. When a present or substituted artifact's digest differs from the recipe's
(or it has none), `verify_artifact` runs on the committed directory; the verdict is kept in
`<store>/verified/<id>-<rules digest>.json` (the artifact itself stays immutable), so the
check runs once per artifact and rule set. A failure is CheckFailed (exit 1) unless
commit_failed=1, which accepts it with a warning.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.config.settings import Settings
from orchestrator.console import console
from orchestrator.errors import CheckFailed
from orchestrator.fs import write_atomic
from orchestrator.hashing import digest_of, pretty_json
from orchestrator.model.manifest import MANIFEST_NAME
from orchestrator.store.artifacts import Store

if TYPE_CHECKING:
    from orchestrator.plan.derivation import Plan

RULES_DIGEST_LEN = 16


def rules_digest(plan: Plan) -> str:
    """The identity of the recipe's [verify] rules (their parsed content)."""
    rules = plan.recipe.verify.model_dump(mode="json")
    if not rules["ignore"]:  # added later (issue 33): the digests of rules without it stay
        del rules["ignore"]
    return digest_of(rules)[:RULES_DIGEST_LEN]


def verdict_path(store: Store, artifact_id: str, digest: str) -> Path:
    return store.paths.verified / f"{artifact_id}-{digest}.json"


def recorded_rules(artifact: Path) -> str | None:
    """The manifest's `verify.rules`, read as JSON rather than through the Manifest model: a
    PyTorch manifest (10k files) cost 0.075 s through pydantic on every no-op build and
    switch, for this one field. Anything else than a string there is None (verify again)."""
    try:
        data = json.loads((artifact / MANIFEST_NAME).read_bytes())
    except ValueError:
        return None
    verify = data.get("verify") if isinstance(data, dict) else None
    rules = verify.get("rules") if isinstance(verify, dict) else None
    return rules if isinstance(rules, str) else None


def reverify_if_rules_changed(settings: Settings, store: Store, plan: Plan,
                              artifact: Path) -> bool | None:
    """Verify `artifact` again when its recorded rules differ from the recipe's.

    Returns None when nothing had to run (same rules, or a verdict already recorded),
    otherwise the new verdict (True = passed)."""
    digest = rules_digest(plan)
    recorded = recorded_rules(artifact)
    if recorded == digest:
        return None
    marker = verdict_path(store, plan.artifact_id, digest)
    if marker.is_file():
        ok = bool(json.loads(marker.read_text()).get("ok"))
        if not ok and not settings.commit_failed:
            raise CheckFailed(f"{plan.name} fails the recipe's current verify rules (recorded in "
                              f"{marker}); fix the rules or the build, or pass commit_failed=1")
        return None
    from orchestrator.toolchain.materialize import ensure_toolchain
    from orchestrator.verify import verify_artifact

    console.print(f"verify rules changed since {plan.name} was verified: verifying it again")
    report = verify_artifact(artifact, plan, ensure_toolchain(store, plan.lock))
    write_atomic(marker, pretty_json({**report.summary(), "rules": digest}))
    if report.ok:
        return True
    if settings.commit_failed:
        console.print(f"warning: {report.headline()} (accepted: commit_failed=1)", markup=False)
        return False
    raise CheckFailed(f"{report.headline()}; {plan.name} was verified under other rules",
                      report.render())
