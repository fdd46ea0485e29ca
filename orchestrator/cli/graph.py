"""The artifacts as doit tasks: one `artifact:<recipe>:<variant>` task per recipe variant in
recipes/, so doit's own commands mean what doit users expect of them:

    doit list --all                          # every recipe variant, under the verbs
    doit info artifact:demo:release          # would it run, and why (its uptodate)
    doit artifact:demo:release               # realise it (as `doit build recipe=demo variant=release`)
    doit -n 2 artifact:demo:release artifact:demo:debug    # independent variants in parallel

A task's `uptodate` is answered by the content-addressed store: the variant's artifact id,
planned from the lock, recipe and source as `doit build` plans it, is already committed. Its
action is `doit build` itself (realise: present, substituted or built → verified →
committed). The verbs (`doit build recipe=... variant=...`) stay the everyday commands; these
tasks are the same work, named per artifact. Listing them reads only the recipes' TOML (the
variant names), never the planner.
"""
from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from orchestrator.cli import doit_glue


def recipe_variants(recipes_dir: Path) -> list[tuple[str, list[str]]]:
    """(recipe, its variant names) of every recipes/*.toml that reads as TOML with a
    [variants] table; anything else is left to `doit build recipe=...` to report."""
    out = []
    for path in sorted(recipes_dir.glob("*.toml")):
        try:
            variants = tomllib.loads(path.read_text()).get("variants")
        except (OSError, ValueError, RecursionError):  # TOMLDecodeError, UnicodeDecodeError
            continue  # not listed: `doit build recipe=...` says what is wrong with it
        if isinstance(variants, dict) and variants:
            out.append((path.stem, sorted(variants)))
    return out


def artifact_present(recipe: str, variant: str) -> bool:
    """The variant's artifact is in the store (doit's uptodate); a plan that fails says
    nothing here: the task runs and `doit build` reports it."""
    from orchestrator.errors import UserError
    from orchestrator.plan.derivation import make_plan
    from orchestrator.store.artifacts import Store

    try:
        settings = doit_glue.current_settings("build", {"recipe": recipe, "variant": variant})
        store = Store(settings.store_root)
        return store.find(make_plan(settings, store).artifact_id) is not None
    except (UserError, OSError):
        return False


def task_artifact() -> Iterator[dict[str, Any]]:
    yield {"basename": doit_glue.ARTIFACT_TASKS, "name": None,
           "doc": "one task per recipe variant: artifact:<recipe>:<variant> (doit list --all)"}
    for recipe, variants in recipe_variants(doit_glue.REPO_ROOT / "recipes"):
        for variant in variants:
            fixed = {"recipe": recipe, "variant": variant}
            yield {"basename": doit_glue.ARTIFACT_TASKS, "name": f"{recipe}:{variant}",
                   "doc": f"realise {recipe} {variant}: as `doit build recipe={recipe} variant={variant}`",
                   "actions": [doit_glue.action("build:cmd_build", "build", fixed=fixed)],
                   "uptodate": [(artifact_present, [recipe, variant], {})],
                   "verbosity": 2}
