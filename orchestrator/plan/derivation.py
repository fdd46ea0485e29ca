"""Plan: recipe + variant + lock + source → derivation → artifact id.

The derivation holds everything that reaches THIS variant's build and nothing that cannot
change its output: the resolved variant, the recipe's build/source/outputs sections (their
parsed content), the lock entries used (by digest), the source identity and the platform.
Other variants, the description, the verify rules (re-checked instead, see realise), TOML
formatting, parallelism, the compile cache and the checkout's absolute path are not in it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.config.settings import Settings
from orchestrator.errors import UserError
from orchestrator.hashing import digest_of
from orchestrator.lock.files import load_lock
from orchestrator.lock.runtime import load_runtime_lock
from orchestrator.model.lock import Lock, LockEntry
from orchestrator.model.platform_facts import platform_facts
from orchestrator.model.recipe import Recipe, ResolvedVariant, load_recipe, resolve_variant
from orchestrator.model.runtime_lock import RuntimeLock
from orchestrator.sources.prepare import prepare_source
from orchestrator.sources.prepared import PreparedSource
from orchestrator.store.artifacts import Store
from orchestrator.toolchain.cuda_toolkit import check_recipe_has_toolkit
from orchestrator.toolchain.machine_check import check_machine, machine_cache, probe_cache, save_machine_cache

# 3 (stop 47): every artifact's Python packages hold hash-checked .pyc files (builders/bytecode.py).
DERIVATION_SCHEMA = 3
# A builder whose code changed the bytes it writes, when not every builder's did (that bumps
# DERIVATION_SCHEMA): its artifacts get new ids, the others keep theirs. pytorch 2: the pinned
# tree's copy is named /orch/src/<recipe> in debug info (was /orch/build/<recipe>-<variant>/source).
BUILDER_REVISION = {"pytorch": 3}
# Lock entries a build system depends on when the recipe does not say.
DEFAULT_USES = {
    "cmake": ["python", "compiler:cc", "compiler:cxx", "pypi:cmake", "pypi:ninja"],
    "setuptools": ["python", "compiler:cc", "compiler:cxx", "pypi:setuptools"],
    "pytorch": ["python", "compiler:cc", "compiler:cxx", "pypi:cmake", "pypi:ninja"],
}


@dataclass
class Plan:
    recipe: Recipe
    variant_name: str
    variant: ResolvedVariant
    lock: Lock
    inputs: dict[str, LockEntry]
    source: PreparedSource
    derivation: dict[str, Any]
    artifact_id: str
    # `[runtime] requires` as locks/runtime/<recipe>.lock.json pins them (None without).
    runtime: RuntimeLock | None = None

    @property
    def source_dir(self) -> Path:
        return self.source.dir

    @property
    def name(self) -> str:
        return f"{self.artifact_id}-{self.recipe.name}-{self.variant_name}"


def artifact_id_of(derivation: dict[str, Any]) -> str:
    return digest_of(derivation)[:40]


def used_keys(recipe: Recipe) -> list[str]:
    if recipe.build.uses is not None:
        return sorted(recipe.build.uses)
    return sorted(DEFAULT_USES[recipe.build.system])


def derivation_of(recipe: Recipe, variant: ResolvedVariant, inputs: dict[str, LockEntry],
                  source_identity: Any, runtime: RuntimeLock | None = None) -> dict[str, Any]:
    """The canonical content of one variant's build (see the module docstring). The runtime
    pins are in it when the recipe has any (the entry holds them): a recipe without
    `[runtime]` keeps the id it had before the section existed."""
    derivation = {
        "schema": DERIVATION_SCHEMA,
        "builder": recipe.build.system,
        "recipe": {
            "name": recipe.name,  # names the logical /orch/src/<recipe> root in debug info
            "build": recipe.build.model_dump(mode="json"),
            "source": recipe.source.model_dump(mode="json"),
            "outputs": recipe.outputs.model_dump(mode="json"),
        },
        # exclude_defaults: split_dwarf, unset, keeps the ids of the variants that predate it
        "variant": variant.model_dump(mode="json", exclude_defaults=True),
        "inputs": {k: e.digest() for k, e in sorted(inputs.items())},
        "source": source_identity,
        "platform": platform_facts(),
    }
    if runtime is not None:
        derivation["runtime"] = runtime.digests()
    if recipe.build.system in BUILDER_REVISION:
        derivation["builder_revision"] = BUILDER_REVISION[recipe.build.system]
    return derivation


def make_plan(settings: Settings, store: Store, recipe_name: str | None = None,
              variant: str | None = None) -> Plan:
    name = recipe_name or settings.recipe
    recipe = load_recipe(settings.recipes_dir, name)
    where = f"recipes/{name}.toml"
    resolved = resolve_variant(recipe, variant or settings.variant, where=where)
    if settings.vars.get("targets"):
        resolved = resolved.model_copy(update={"targets": settings.vars["targets"].split(",")})
    lock = load_lock(settings.locks_dir, recipe.lock)
    check_recipe_has_toolkit(recipe, resolved, lock, where)
    keys = used_keys(recipe)
    missing = [k for k in keys if k not in lock.entries]
    if missing:
        raise UserError(f"{where}: build.uses names {missing[0]!r}, which locks/{recipe.lock}.lock.json "
                        "does not have; add it to the lock spec and run `doit lock`")
    stats, probes = machine_cache(store), probe_cache(store)
    check_machine(lock, keys, stats, save=False, probes=probes)
    runtime = load_runtime_lock(settings.locks_dir, recipe, lock)
    source = prepare_source(settings, recipe, store)
    inputs = {k: lock.entries[k] for k in keys}
    derivation = derivation_of(recipe, resolved, inputs, source.identity, runtime)
    save_machine_cache(stats, probes)  # only once the plan is made: bad input changes nothing
    return Plan(recipe=recipe, variant_name=resolved.name, variant=resolved, lock=lock,
                inputs=inputs, source=source, derivation=derivation,
                artifact_id=artifact_id_of(derivation), runtime=runtime)
