"""The realise pipeline as doit's task graph: per recipe variant, one task per step, each with
`task_dep` on the step before it and an `uptodate` the content-addressed store answers
(realise/steps.py says what "done" means for each):

    step-toolchain:<lock>                 the lock's toolchain is materialized
    step-source:<recipe>                  the recipe's source is prepared
    step-build:<recipe>:<variant>         built into tmp/staged-<id>/ (or substituted)
    step-verify:<recipe>:<variant>        the staged output passed verify
    step-commit:<recipe>:<variant>        the artifact is in the store
    artifact:<recipe>:<variant>           all of the above (task_dep on step-commit)

so doit's own commands mean what doit users expect of them:

    doit list --all                            # every step of every recipe variant
    doit info step-build:demo:release          # would it run, and which check said so
    doit artifact:demo:release                 # the steps not done, in order
    doit -n 2 artifact:demo:release artifact:demo:debug   # shared steps once, builds in parallel

The groups are `step-<name>`, not `build:` or `verify:`: those basenames are the verbs, and a
doit group task has no action of its own. A variant's plan (its artifact id) is made by each
step from the lock, recipe and source, as `doit build` makes it; the verbs stay the everyday
commands, and these tasks are the same work, named per step. Listing reads only the recipes'
TOML (variant and lock names), never the planner.
"""
from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from orchestrator.cli import doit_glue

STEP = "step-"  # the step groups' prefix (doit_glue.GRAPH_GROUPS names them all)


def recipe_variants(recipes_dir: Path) -> list[tuple[str, str, list[str]]]:
    """(recipe, its lock, its variant names) of every recipes/*.toml that reads as TOML with a
    [variants] table; anything else is left to `doit build recipe=...` to report."""
    out = []
    for path in sorted(recipes_dir.glob("*.toml")):
        try:
            data = tomllib.loads(path.read_text())
        except (OSError, ValueError, RecursionError):  # TOMLDecodeError, UnicodeDecodeError
            continue  # not listed: `doit build recipe=...` says what is wrong with it
        variants, lock = data.get("variants"), data.get("lock", "toolchain")
        if isinstance(variants, dict) and variants and isinstance(lock, str):
            out.append((path.stem, lock, sorted(variants)))
    return out


def _settings(fixed: dict[str, str]) -> Any:
    return doit_glue.current_settings("build", fixed)


def _answer(question: Callable[[], bool]) -> bool:
    """An uptodate's answer; a plan or lock that fails says nothing here: the step runs and
    reports it."""
    from orchestrator.errors import UserError

    try:
        return question()
    except (UserError, OSError):
        return False


def _plan(fixed: dict[str, str]) -> tuple[Any, Any, Any]:
    from orchestrator.realise.pipeline import planned
    from orchestrator.store.artifacts import Store

    settings = _settings(fixed)
    store = Store(settings.store_root)
    return settings, store, planned(settings, store)


def toolchain_done(lock: str) -> bool:
    from orchestrator.realise import steps

    return _answer(lambda: steps.toolchain_done(_settings({}), lock))


def source_done(recipe: str) -> bool:
    from orchestrator.realise import steps

    return _answer(lambda: steps.source_done(_settings({"recipe": recipe}), recipe))


def step_done(step: str, recipe: str, variant: str) -> bool:
    """build / verify / commit of the variant is done (the store's answer)."""
    from orchestrator.realise import steps

    def ask() -> bool:
        _, store, plan = _plan({"recipe": recipe, "variant": variant})
        if step == "commit":
            return steps.committed(store, plan) is not None
        return (steps.build_done if step == "build" else steps.verify_done)(store, plan)

    return _answer(ask)


def artifact_present(recipe: str, variant: str) -> bool:
    return step_done("commit", recipe, variant)


def _run_toolchain(lock: str) -> Callable[[Any], object]:
    def run(settings: Any) -> object:
        from orchestrator.realise import steps

        return steps.step_toolchain(settings, lock)
    return run


def _run_source(recipe: str) -> Callable[[Any], object]:
    def run(settings: Any) -> object:
        from orchestrator.realise import steps

        return steps.step_source(settings, recipe)
    return run


def _run_step(step: str) -> Callable[[Any], object]:
    def run(settings: Any) -> object:
        from orchestrator.realise import steps
        from orchestrator.realise.pipeline import planned
        from orchestrator.store.artifacts import Store

        store = Store(settings.store_root)
        plan = planned(settings, store)
        if step == "commit":
            return steps.step_commit(store, plan)
        return (steps.step_build if step == "build" else steps.step_verify)(settings, store, plan)
    return run


def _group(name: str, doc: str) -> dict[str, Any]:
    return {"basename": name, "name": None, "doc": doc}


def task_artifact() -> Iterator[dict[str, Any]]:
    listed = recipe_variants(doit_glue.REPO_ROOT / "recipes")
    yield _group(STEP + "toolchain", "the locks' toolchains: step-toolchain:<lock>")
    for lock in sorted({lock for _, lock, _ in listed}):
        yield {"basename": STEP + "toolchain", "name": lock, "doc": f"materialize lock {lock}'s toolchain",
               "actions": [doit_glue.step_action(_run_toolchain(lock), {})],
               "uptodate": [(toolchain_done, [lock], {})], "verbosity": 2}
    yield _group(STEP + "source", "the recipes' sources: step-source:<recipe>")
    for recipe, _, _ in listed:
        fixed = {"recipe": recipe}
        yield {"basename": STEP + "source", "name": recipe, "doc": f"prepare {recipe}'s source",
               "actions": [doit_glue.step_action(_run_source(recipe), fixed)],
               "uptodate": [(source_done, [recipe], {})], "verbosity": 2}
    for step, what, deps in (("build", "build (or substitute)", None), ("verify", "verify the staged", "build"),
                             ("commit", "commit the verified", "verify")):
        yield _group(STEP + step, f"{what} output of a recipe variant: {STEP}{step}:<recipe>:<variant>")
        for recipe, lock, variants in listed:
            for variant in variants:
                fixed = {"recipe": recipe, "variant": variant}
                before = ([f"{STEP}toolchain:{lock}", f"{STEP}source:{recipe}"] if deps is None
                          else [f"{STEP}{deps}:{recipe}:{variant}"])
                yield {"basename": STEP + step, "name": f"{recipe}:{variant}",
                       "doc": f"{what} {recipe} {variant}",
                       "actions": [doit_glue.step_action(_run_step(step), fixed)], "task_dep": before,
                       "uptodate": [(step_done, [step, recipe, variant], {})], "verbosity": 2}
    yield _group(doit_glue.ARTIFACT_TASKS, "one task per recipe variant: artifact:<recipe>:<variant> "
                 "(its steps: doit list --all)")
    for recipe, _, variants in listed:
        for variant in variants:
            yield {"basename": doit_glue.ARTIFACT_TASKS, "name": f"{recipe}:{variant}",
                   "doc": f"realise {recipe} {variant}: its steps not done, in order",
                   "actions": None, "task_dep": [f"{STEP}commit:{recipe}:{variant}"],
                   "uptodate": [(artifact_present, [recipe, variant], {})], "verbosity": 2}
