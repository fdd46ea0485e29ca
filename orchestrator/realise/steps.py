"""The realise pipeline as separate steps, for doit's task graph (cli/graph.py) and the bot.

`realise()` runs toolchain → source → build → verify → commit inside one call. Here each is a
function of its own with an `*_done` question the store answers, so that doit can order them
(`task_dep`), skip the done ones (`uptodate`) and say why one would run (`doit info`):

    toolchain   the lock's toolchain is materialized        toolchains/<hash>/toolchain.json
    source      the recipe's source is prepared             (planning prepares it)
    build       the variant is built (or substituted)       tmp/staged-<id>/ + staged-<id>.json
    verify      the staged output passed verify             staged-<id>.json has `verify`
    commit      the artifact is in the store                store/<id>-.../manifest.json

Between the steps the built output waits in `tmp/staged-<artifact id>/`, which no reader of
the store sees (nothing is an artifact until its commit renames it into store/), and a record
beside it (`staged-<id>.json`) carries what the commit needs from the build (prefix map,
timings) and, once verified, the verdict. The directory is named by the artifact id, so a
later step of another plan never takes it; `doit gc` removes what a stopped graph left.
"""
from __future__ import annotations

import json
import os
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from orchestrator.cache.toolchain_hook import toolchain_substituter
from orchestrator.config.settings import Settings
from orchestrator.console import phase
from orchestrator.errors import CheckFailed, UserError
from orchestrator.fs import remove_tree, write_atomic
from orchestrator.hashing import pretty_json
from orchestrator.lock.files import load_lock
from orchestrator.plan.derivation import Plan
from orchestrator.realise import build_usage
from orchestrator.realise.pipeline import (
    Realised,
    commit_built,
    failed_dir,
    keep_failed_build,
    planned,
    run_verify,
)
from orchestrator.realise.reverify import reverify_if_rules_changed
from orchestrator.store.artifacts import Store
from orchestrator.toolchain.materialize import TOOLCHAIN_JSON, Toolchain, ensure_toolchain, toolchain_root

STEPS = ("toolchain", "source", "build", "verify", "commit")
STAGED_PREFIX = "staged-"


class StepFailed(Exception):
    """A step's failure, naming the step (the bot's `stage`); `cause` is the original error."""

    def __init__(self, step: str, cause: Exception) -> None:
        super().__init__(str(cause))
        self.step, self.cause = step, cause


def staged_dir(store: Store, plan: Plan) -> Path:
    return store.tmp_dir / f"{STAGED_PREFIX}{plan.artifact_id}"


def staged_record(store: Store, plan: Plan) -> Path:
    return store.tmp_dir / f"{STAGED_PREFIX}{plan.artifact_id}.json"


def read_record(store: Store, plan: Plan) -> dict[str, Any] | None:
    try:
        record: dict[str, Any] = json.loads(staged_record(store, plan).read_text())
    except (OSError, ValueError):
        return None
    if record.get("id") != plan.artifact_id or not staged_dir(store, plan).is_dir():
        return None
    return record


def committed(store: Store, plan: Plan) -> Path | None:
    return store.find(plan.artifact_id)


def held(store: Store, plan: Plan, toolchain: Toolchain) -> AbstractContextManager[object]:
    """The plan's build-tree lock (the one `realise` holds from build to commit): each step
    holds it and asks again whether it is done, so two graphs (or a graph and `doit build`)
    never build, verify or commit the same staged output at once."""
    from orchestrator.builders.context import build_tree_of

    return store.lock(f"build-{build_tree_of(store, plan, toolchain).name}")


# -- toolchain --------------------------------------------------------------------------------
def toolchain_done(settings: Settings, lock_name: str) -> bool:
    lock = load_lock(settings.locks_dir, lock_name)
    return (toolchain_root(Store(settings.store_root), lock) / TOOLCHAIN_JSON).is_file()


def step_toolchain(settings: Settings, lock_name: str) -> Toolchain:
    store = Store(settings.store_root)
    store.ensure()
    return ensure_toolchain(store, load_lock(settings.locks_dir, lock_name),
                            toolchain_substituter(settings))


# -- source: planning prepares it (the id hashes the prepared tree) ----------------------------
def source_done(settings: Settings, recipe_name: str) -> bool:
    """A path source is the checkout itself; a pinned archive is done once unpacked and
    stamped. A git source or a `source=` checkout is prepared on every run (a fetch of what
    is there already, or a copy that only refreshes what changed)."""
    from orchestrator.model.recipe import PathSource, load_recipe
    from orchestrator.sources.archive import archive_prepared

    recipe = load_recipe(settings.recipes_dir, recipe_name)
    if isinstance(recipe.source, PathSource) and not settings.vars.get("source"):
        return True
    return archive_prepared(settings, recipe, Store(settings.store_root))


def step_source(settings: Settings, recipe: str) -> Plan:
    """Prepare the recipe's source (fetch, unpack, patch: once per identity), by planning
    its default variant; every variant of the recipe shares the prepared tree."""
    return planned(settings, Store(settings.store_root), recipe)


# -- build ------------------------------------------------------------------------------------
def build_done(store: Store, plan: Plan) -> bool:
    return committed(store, plan) is not None or read_record(store, plan) is not None


def step_build(settings: Settings, store: Store, plan: Plan) -> None:
    """Substitute the artifact (committed: verify and commit are then done) or build it into
    tmp/staged-<id>/, with its record."""
    if build_done(store, plan):
        return
    toolchain = ensure_toolchain(store, plan.lock, toolchain_substituter(settings))
    if settings.substitute:
        from orchestrator.cache.pull import substitute

        pulled = substitute(settings, plan, store)
        if pulled is not None:
            reverify_if_rules_changed(settings, store, plan, pulled)
            return
    from orchestrator.builders.context import build_tree_of

    build_dir = build_tree_of(store, plan, toolchain)
    with held(store, plan, toolchain):
        if build_done(store, plan):
            return
        _build_locked(settings, store, plan, toolchain, build_dir)


def _build_locked(settings: Settings, store: Store, plan: Plan, toolchain: Toolchain, build_dir: Path) -> None:
    from orchestrator.builders.process import BuildFailed
    from orchestrator.realise.build_step import run_builder

    with store.staging(plan.name) as stage:
        t0 = time.monotonic()
        try:
            with build_usage.measured(build_dir) as usage:
                ctx = run_builder(settings, store, plan, toolchain, build_dir, stage,
                                  settings.compile_cache)
        except BuildFailed as e:
            raise keep_failed_build(store, plan, stage, build_dir, e) from None
        final = staged_dir(store, plan)
        remove_tree(final)  # a staged output whose record was lost: built again
        os.rename(stage, final)
        write_atomic(staged_record(store, plan), pretty_json(
            {"id": plan.artifact_id, "prefix_map": ctx.prefix_map(),
             "timings": {"build_s": round(time.monotonic() - t0, 3), **usage.timings()}}))


# -- verify -----------------------------------------------------------------------------------
def verify_done(store: Store, plan: Plan) -> bool:
    if committed(store, plan) is not None:
        return True
    record = read_record(store, plan)
    return record is not None and "verify" in record


def _staged(store: Store, plan: Plan, step: str) -> dict[str, Any]:
    record = read_record(store, plan)
    if record is None:
        raise UserError(f"{plan.name}: nothing is staged to {step}; run its build step first "
                        f"(doit artifact:{plan.recipe.name}:{plan.variant_name} runs them all)")
    return record


def step_verify(settings: Settings, store: Store, plan: Plan) -> None:
    """Verify the staged output; a failure moves it to tmp/failed-<name>/ (as a build does)."""
    if verify_done(store, plan):
        return
    toolchain = ensure_toolchain(store, plan.lock)
    with held(store, plan, toolchain):
        if not verify_done(store, plan):
            _verify_locked(settings, store, plan, toolchain)


def _verify_locked(settings: Settings, store: Store, plan: Plan, toolchain: Toolchain) -> None:
    record = _staged(store, plan, "verify")
    stage, keep = staged_dir(store, plan), failed_dir(store, plan)
    t0 = time.monotonic()
    with phase("verify") as outcome:
        verify, committable = run_verify(stage, plan, toolchain, settings, keep)
        outcome.failed = not verify["ok"]
    if not committable:
        remove_tree(keep)
        os.rename(stage, keep)
        staged_record(store, plan).unlink(missing_ok=True)
        raise CheckFailed(f"verify failed for {plan.name}: not committed; the staged "
                          f"output is kept in {keep} (commit_failed=1 commits anyway)")
    record["verify"] = verify
    record["timings"]["verify_s"] = round(time.monotonic() - t0, 3)
    write_atomic(staged_record(store, plan), pretty_json(record))


# -- commit -----------------------------------------------------------------------------------
def step_commit(store: Store, plan: Plan) -> Path:
    if (found := committed(store, plan)) is not None:
        return found
    with held(store, plan, ensure_toolchain(store, plan.lock)):
        if (found := committed(store, plan)) is not None:
            return found
        return _commit_locked(store, plan)


def _commit_locked(store: Store, plan: Plan) -> Path:
    record = _staged(store, plan, "commit")
    if "verify" not in record:
        raise UserError(f"{plan.name}: the staged output is not verified; run its verify step "
                        f"first (doit artifact:{plan.recipe.name}:{plan.variant_name} runs them all)")
    path = commit_built(store, plan, staged_dir(store, plan), record["prefix_map"],
                        record["timings"], record["verify"])
    staged_record(store, plan).unlink(missing_ok=True)
    return path


def run_steps(settings: Settings, store: Store, recipe: str, variant: str) -> Realised:
    """Every step in order, in this process (the bot's cells): a failure is StepFailed."""
    def step(name: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except (UserError, CheckFailed) as e:  # an OSError is no failure of a step: raised
            raise StepFailed(name, e) from e

    plan = step("source", planned, settings, store, recipe, variant)
    if (found := committed(store, plan)) is not None:
        step("build", reverify_if_rules_changed, settings, store, plan, found)
        return Realised(found, plan, "present", store)
    toolchain = step("toolchain", ensure_toolchain, store, plan.lock, toolchain_substituter(settings))
    step("build", step_build, settings, store, plan)
    if (pulled := committed(store, plan)) is not None:  # substituted: verified on its way in
        origin = Store.read_manifest(pulled).origin.get("url", "a substituter")
        return Realised(pulled, plan, f"substituted from {origin}", store, _toolchain=toolchain)
    step("verify", step_verify, settings, store, plan)
    path = step("commit", step_commit, store, plan)
    return Realised(path, plan, "built", store, _toolchain=toolchain)
