"""`doit verify`: check a committed artifact (recipe/variant, or id=) and print the report."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from orchestrator.console import console
from orchestrator.errors import CheckFailed, UserError
from orchestrator.settings import Settings
from orchestrator.store import Store
from orchestrator.verify.report import VerifyReport


def _locate(settings: Settings, store: Store):
    """(artifact path, plan) for id= or recipe=/variant=."""
    from orchestrator.plan import make_plan
    from orchestrator.selection import command_for, manifest_selection

    wanted = settings.vars.get("id")
    if wanted:
        matches = [p for p in store.artifacts() if p.name.startswith(wanted)] if len(wanted) >= 6 else []
        if len(matches) != 1:
            what = "no artifact" if not matches else f"{len(matches)} artifacts"
            raise UserError(f"id={wanted}: {what} in {store.store_dir} match; give at least 6 "
                            "hex digits of one (see `doit status`)")
        path = matches[0]
        manifest = Store.read_manifest(path)
        plan = make_plan(settings, store, manifest.recipe, manifest.variant)
        return path, plan
    if not {"recipe", "variant", "source", "targets"} & set(settings.vars):
        # No selection: the workspace's active artifact, what the user runs and debugs.
        from orchestrator.workspace import Workspace

        active = Workspace(settings.workspace).current()
        if active is not None and active.is_dir():
            manifest = Store.read_manifest(active)
            selected = dataclasses.replace(settings, vars={
                **manifest_selection(manifest, settings.workspace), **settings.vars})
            return active, make_plan(selected, store, manifest.recipe, manifest.variant)
    plan = make_plan(settings, store)
    path = store.find(plan.artifact_id)
    if path is None:
        raise UserError(f"{plan.recipe.name} {plan.variant_name} ({plan.artifact_id[:12]}) is not in "
                        f"the store; run `{command_for('build', plan)}`")
    return path, plan


def verify_toolchain(settings: Settings) -> None:
    """`doit verify toolchain=1`: the machine against the lock, and every file of the
    materialized toolchain re-hashed against its manifest (drift: exit 2)."""
    from orchestrator.lock.files import load_lock
    from orchestrator.model.recipe import load_recipe
    from orchestrator.toolchain import verify_toolchain_full

    name = settings.vars.get("lock") or load_recipe(settings.recipes_dir, settings.recipe).lock
    lock = load_lock(settings.locks_dir, name)
    root = verify_toolchain_full(Store(settings.store_root), lock)
    console.print(f"toolchain {name} {root}: every file matches its manifest; the machine "
                  "matches the lock", markup=False)


def check_store_entry(path: Path) -> None:
    """CheckFailed naming every file added, changed or missing since the entry's commit."""
    from orchestrator.verify.store_entry import describe, entry_changes

    changes = entry_changes(path, Store.read_manifest(path))
    if changes:
        raise CheckFailed(f"store entry {path.name} differs from its manifest: {changes.first()}",
                          report=describe(changes))


def cmd_verify(settings: Settings) -> VerifyReport | None:
    """Verify one artifact; exit 1 (CheckFailed) with the report when any check fails."""
    from orchestrator.settings import parse_bool
    from orchestrator.toolchain import ensure_toolchain
    from orchestrator.verify import verify_artifact

    if parse_bool("toolchain", settings.vars.get("toolchain", "0")):
        return verify_toolchain(settings)

    store = Store(settings.store_root)
    path, plan = _locate(settings, store)
    if settings.fmt != "json":
        console.print(f"verify {path.name}: {path}", markup=False, soft_wrap=True)
    report = verify_artifact(path, plan, ensure_toolchain(store, plan.lock))
    if settings.fmt == "json":
        print(json.dumps(report.to_json(), sort_keys=True))
    else:
        console.print(report.render(), markup=False, soft_wrap=True)
    if not report.ok:
        raise CheckFailed(report.headline())
    check_store_entry(path)
    console.print(report.headline(), markup=False) if settings.fmt != "json" else None
    return report


def stored_report(artifact: Path) -> VerifyReport | None:
    """The report a build stored in meta/verify.json, if any."""
    p = artifact / "meta" / "verify.json"
    return VerifyReport.model_validate_json(p.read_text()) if p.is_file() else None
