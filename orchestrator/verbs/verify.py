"""`doit verify`: check a committed artifact (the active one, recipe/variant, or id=) and print
the report; `doit verify toolchain=1` re-hashes the materialized toolchain instead."""
from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

from orchestrator.config.settings import Settings
from orchestrator.console import console
from orchestrator.errors import CheckFailed, UserError
from orchestrator.lock.files import load_lock
from orchestrator.model.recipe import load_recipe
from orchestrator.plan.artifact_ref import find_stored
from orchestrator.plan.derivation import Plan, make_plan
from orchestrator.plan.selection import command_for, manifest_selection
from orchestrator.store.artifacts import Store
from orchestrator.toolchain.materialize import ensure_toolchain, verify_toolchain_full
from orchestrator.verbs.output import print_json
from orchestrator.verify import verify_artifact
from orchestrator.verify.report import VerifyReport
from orchestrator.verify.store_entry import changes_summary, entry_changes
from orchestrator.workspace.profiles import Workspace


def locate(settings: Settings, store: Store) -> tuple[Path, Plan]:
    """(artifact path, plan) for id=, recipe=/variant=, or else the workspace's active one."""
    wanted = settings.vars.get("id")
    if wanted:
        path = find_stored(store, wanted)
        manifest = Store.read_manifest(path)
        # Its own selection (targets=, a checkout): the plan, and the id it prints, are its.
        selected = dataclasses.replace(settings, vars={
            **manifest_selection(manifest, settings.workspace), **settings.vars})
        return path, make_plan(selected, store, manifest.recipe, manifest.variant)
    if not {"recipe", "variant", "source", "targets"} & set(settings.vars):
        # No selection: the workspace's active artifact, what the user runs and debugs.
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
                        f"the store{other_selections(settings, store, plan)}; run "
                        f"`{command_for('build', plan)}`")
    return path, plan


def other_selections(settings: Settings, store: Store, plan: Plan) -> str:
    """What the store has of this recipe and variant under other targets= (a partial build
    is another artifact: `doit verify` selects it as `doit build` did)."""
    if "targets" in settings.vars:
        return ""
    found = []
    for art in store.artifacts():
        m = Store.read_manifest(art)
        sel = manifest_selection(m, settings.workspace)
        if (m.recipe, m.variant) == (plan.recipe.name, plan.variant_name) and "targets" in sel:
            found.append(f"targets={sel['targets']} ({m.id[:12]})")
    if not found:
        return ""
    return (f" (it has {', '.join(sorted(found))}: add that targets= as `doit build` had it, "
            "or pass id=)")


def verify_toolchain(settings: Settings) -> None:
    """`doit verify toolchain=1`: the machine against the lock, and every file of the
    materialized toolchain re-hashed against its manifest (drift: exit 2)."""
    name = settings.vars.get("lock") or load_recipe(settings.recipes_dir, settings.recipe).lock
    lock = load_lock(settings.locks_dir, name)
    root = verify_toolchain_full(Store(settings.store_root), lock)
    console.print(f"toolchain {name} {root}: every file matches its manifest; the machine "
                  "matches the lock", markup=False)


def check_store_entry(path: Path) -> None:
    """CheckFailed naming every file added, changed or missing since the entry's commit."""
    changes = entry_changes(path, Store.read_manifest(path))
    if changes:
        raise CheckFailed(f"store entry {path.name} differs from its manifest: {changes.first()}",
                          report=changes_summary(changes))


def cmd_verify(settings: Settings) -> VerifyReport | None:
    """Verify one artifact; exit 1 (CheckFailed) with the report when any check fails."""
    if settings.flag("toolchain"):
        return verify_toolchain(settings)

    store = Store(settings.store_root)
    path, plan = locate(settings, store)
    human = settings.fmt != "json"
    # The manifest's hashes key the verdict cache: check_store_entry below re-reads every
    # file, so a file that no longer has its manifest's content fails there.
    manifest = Store.read_manifest(path)
    hashes = {f.path: f.sha256 for f in manifest.files if f.sha256}
    # The report's own title names the artifact: no header line before it (a spinner on a
    # terminal while it runs).
    with console.status(f"verify {path.name}") if human and console.is_terminal \
            else contextlib.nullcontext():
        report = verify_artifact(path, plan, ensure_toolchain(store, plan.lock), hashes)
    if human:
        console.print(report.render(full_report=f"`{command_for('verify', plan)} format=json`"),
                      markup=False, soft_wrap=True)
    else:
        print_json(report.to_json())
    if not report.ok:
        raise CheckFailed(report.headline())
    check_store_entry(path)
    if human:
        console.print(report.headline(), markup=False)
    return report
