"""The artifacts a `doit bench` / `doit run` names: variants of one recipe (realised like
`doit switch` does: built when missing), or stored ids (the id= rule of artifact_ref). Each
side carries what its own environment is made of: its store path, its recipe's outputs (from
its derivation) and its toolchain."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.config.settings import Settings
from orchestrator.errors import UserError
from orchestrator.lock.files import load_lock
from orchestrator.model.recipe import RUNTIME_SITE, load_recipe, path_outputs
from orchestrator.plan.artifact_ref import find_stored
from orchestrator.plan.derivation import make_plan
from orchestrator.realise.pipeline import Realised, realise
from orchestrator.store.artifacts import Store
from orchestrator.toolchain.materialize import ensure_toolchain


@dataclass(frozen=True)
class Side:
    label: str  # the variant name, or the id as given
    artifact_id: str
    name: str  # <id>-<recipe>-<variant>
    path: Path  # the store entry
    outputs: dict[str, list[str]]  # lib/bin/python dirs below prefix/
    toolchain_root: Path
    derivation: dict[str, Any]


def names_of(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def realised_side(r: Realised, label: str) -> Side:
    return Side(label, r.plan.artifact_id, r.plan.name, r.path,
                path_outputs(r.plan.recipe), r.toolchain.root, r.plan.derivation)


def variant_side(settings: Settings, store: Store, variant: str) -> Side:
    return realised_side(realise(settings, store, None, variant), variant)


def stored_side(settings: Settings, store: Store, wanted: str, label: str) -> Side:
    path = find_stored(store, wanted, label=label)
    manifest = Store.read_manifest(path)
    outputs = manifest.derivation.get("recipe", {}).get("outputs")
    if not isinstance(outputs, dict):
        raise UserError(f"{label}{wanted}: its derivation names no outputs (stored by an older "
                        "orchestrator?); rebuild it")
    # Its toolchain: the recipe's lock as it is now (the interpreter and wheels a run uses);
    # not a plan of the recipe, whose source may be another (a checkout's, or a partial
    # build's pinned tree that is not unpacked here).
    toolchain = ensure_toolchain(store, load_lock(settings.locks_dir,
                                                  load_recipe(settings.recipes_dir, manifest.recipe).lock))
    if manifest.derivation.get("runtime"):  # its [runtime] requires, in the entry
        outputs = {**outputs, "runtime": [RUNTIME_SITE]}
    return Side(wanted, manifest.id, manifest.name, path, outputs, toolchain.root,
                manifest.derivation)


def bench_sides(settings: Settings, store: Store) -> list[Side]:
    """variants=a,b or ids=A,B: exactly two, else bad input (nothing built)."""
    variants = names_of(settings.vars.get("variants", ""))
    ids = names_of(settings.vars.get("ids", ""))
    if variants and ids:
        raise UserError("bench: give variants=a,b or ids=A,B, not both")
    given = variants or ids
    if len(given) != 2:
        raise UserError(f"bench: compare two artifacts: variants=relwithdebinfo,release or "
                        f"ids=A,B (6+ hex digits each); got {len(given)}")
    if ids:
        if settings.vars.get("targets") or settings.vars.get("source"):
            raise UserError("bench: targets= and source= select what variants= builds; ids= "
                            "names stored artifacts as they are: drop them, or give variants=")
        return [stored_side(settings, store, x, "bench: ids=") for x in ids]
    for v in variants:  # both names checked before anything is built
        make_plan(settings, store, None, v)
    return [variant_side(settings, store, v) for v in variants]


def run_side(settings: Settings, store: Store) -> Side:
    """`doit run`: id= (stored) or recipe=/variant= (realised)."""
    wanted = settings.vars.get("id", "").strip()
    if wanted:
        return stored_side(settings, store, wanted, "run: id=")
    return variant_side(settings, store, settings.variant)
