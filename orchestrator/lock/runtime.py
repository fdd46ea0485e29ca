"""A recipe's `[runtime] requires` ↔ `locks/runtime/<recipe>.lock.json` (model/runtime_lock.py):
resolved by `doit lock` after the locks, read by the plan (a missing or stale file is one
line: run `doit lock`)."""
from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from orchestrator.errors import UserError
from orchestrator.fs import write_atomic
from orchestrator.hashing import pretty_json
from orchestrator.lock.files import load_lock
from orchestrator.lock.resolve import resolve_pypi
from orchestrator.memo.file_reads import note_path
from orchestrator.model.lock import Lock, PypiEntry, PythonEntry
from orchestrator.model.recipe import Recipe, describe_validation_error, load_recipe
from orchestrator.model.runtime_lock import RuntimeLock, toolchain_basis
from orchestrator.model.user_file import read_json

RUNTIME_LOCKS = "runtime"  # locks/runtime/<recipe>.lock.json


def runtime_lock_path(locks_dir: Path, recipe: str) -> Path:
    return locks_dir / RUNTIME_LOCKS / f"{recipe}.lock.json"


def render_runtime_lock(rl: RuntimeLock) -> str:
    return pretty_json(rl.model_dump(mode="json"))


def resolve_runtime(recipe: Recipe, lock: Lock, previous: RuntimeLock | None = None,
                    upgrade: bool = False) -> RuntimeLock:
    """Pin recipe.runtime.requires for lock's interpreter, held to lock's pypi pins; what the
    lock already installs in the toolchain's venv is left out. The previous file's versions
    are kept while the requirements allow them (as `doit lock` keeps a lock's)."""
    py = lock.entries.get("python")
    if not isinstance(py, PythonEntry):
        raise UserError(f"locks/{lock.name}.lock.json has no python entry; run `doit lock`")
    held = {e.name: e.version for e in lock.entries.values() if isinstance(e, PypiEntry)}
    preferred = {} if upgrade or previous is None else \
        {e.name: e.version for e in previous.entries.values()}
    try:
        found = resolve_pypi(py.path, list(recipe.runtime.requires), preferred, held=held)
    except UserError as e:
        raise UserError(f"recipes/{recipe.name}.toml [runtime] requires, held to "
                        f"locks/{lock.name}.lock.json's pins: {e}") from None
    own = [e for e in found if e.name not in held]
    return RuntimeLock(recipe=recipe.name, lock=lock.name, requires=list(recipe.runtime.requires),
                       basis_sha256=toolchain_basis(lock),
                       entries={e.key: e for e in sorted(own, key=lambda e: e.name)})


def read_runtime_lock(path: Path) -> RuntimeLock | None:
    """The file as it is (None when absent); a damaged one is one line."""
    note_path(path)  # a plan memo: a file written later counts
    if not path.is_file():
        return None
    data = read_json(path, "run `doit lock` to rewrite it")
    try:
        return RuntimeLock.model_validate(data)
    except ValidationError as e:
        raise UserError(f"{path}: {describe_validation_error(e)}; run `doit lock` to rewrite it") from None


def load_runtime_lock(locks_dir: Path, recipe: Recipe, lock: Lock) -> RuntimeLock | None:
    """The recipe's runtime pins for a plan (None without `[runtime] requires`)."""
    if not recipe.runtime.requires:
        return None
    path = runtime_lock_path(locks_dir, recipe.name)
    rl = read_runtime_lock(path)
    if rl is None:
        raise UserError(f"recipes/{recipe.name}.toml has [runtime] requires but {path} does not "
                        f"exist; run `doit lock recipe={recipe.name}`")
    why = None
    if rl.recipe != recipe.name or rl.requires != list(recipe.runtime.requires):
        why = f"[runtime] requires of recipes/{recipe.name}.toml changed"
    elif rl.lock != lock.name:
        why = f"the recipe's lock is now {lock.name!r}, not {rl.lock!r}"
    elif rl.basis_sha256 != toolchain_basis(lock):
        why = f"locks/{lock.name}.lock.json's interpreter or pypi pins changed"
    if why is not None:
        raise UserError(f"{path} is stale: {why} since it was written; run "
                        f"`doit lock recipe={recipe.name}`")
    return rl


def runtime_recipes(recipes_dir: Path, lock_name: str | None,
                    recipe_name: str | None = None) -> list[Recipe]:
    """The recipes with `[runtime] requires` (of lock `lock_name` when given; only
    `recipe_name` when given, which must have some); an invalid recipe is one line (exit 2)
    before anything is resolved."""
    if recipe_name is not None:
        recipe = load_recipe(recipes_dir, recipe_name)
        if not recipe.runtime.requires:
            raise UserError(f"recipes/{recipe_name}.toml has no [runtime] requires: nothing to "
                            "lock for recipe=; `doit lock` without it resolves locks/*.toml")
        return [recipe]
    recipes = [load_recipe(recipes_dir, p.stem) for p in sorted(recipes_dir.glob("*.toml"))]
    return [r for r in recipes if r.runtime.requires and lock_name in (None, r.lock)]


def lock_runtimes(locks_dir: Path, recipes_dir: Path, lock_name: str | None,
                  resolved: dict[str, Lock], upgrade: bool = False,
                  recipe_name: str | None = None) -> list[tuple[Path, str]]:
    """(path, rendered file) of every runtime lock `doit lock` (lock=NAME: of that lock's
    recipes) would write; against `resolved` (this run's locks, name -> lock), else the
    recipe's lock as it is on disk."""
    out = []
    for recipe in runtime_recipes(recipes_dir, lock_name, recipe_name):
        path = runtime_lock_path(locks_dir, recipe.name)
        try:
            previous = read_runtime_lock(path)
        except UserError:
            previous = None  # a damaged file is rewritten
        lock = resolved.get(recipe.lock) or load_lock(locks_dir, recipe.lock)
        rl = resolve_runtime(recipe, lock, previous, upgrade)
        out.append((path, render_runtime_lock(rl)))
    return out


def save_runtime_lock(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)
