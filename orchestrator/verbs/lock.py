"""`doit lock`: resolve locks/*.toml into locks/*.lock.json (lock=NAME for one, lock=git-sources
for the git sources' rev → commit pins), then recipes' `[runtime] requires` into
locks/runtime/<recipe>.lock.json (recipe=NAME: only that one, nothing else resolved). check=1
(like `uv lock --check`) resolves the same and writes nothing: exit 1 naming each lock re-resolving would change."""
from __future__ import annotations

import json

from orchestrator.config.settings import Settings
from orchestrator.console import console, working
from orchestrator.errors import CheckFailed
from orchestrator.lock.files import lock_path, render_lock, save_lock
from orchestrator.lock.resolve import lock_all
from orchestrator.store.artifacts import Store


def changed_entries(before: str | None, after: str) -> list[str]:
    """The entry keys (or top-level fields) a rewrite would change."""
    try:
        old = json.loads(before) if before is not None else {}
        new = json.loads(after)
    except ValueError:
        return ["(the file does not parse)"]
    if not isinstance(old, dict):
        return ["(the file is not a lock)"]
    keys = [k for k in sorted(old.keys() | new.keys()) if k != "entries" and old.get(k) != new.get(k)]
    old_e, new_e = old.get("entries") or {}, new.get("entries") or {}
    if not isinstance(old_e, dict):
        return [*keys, "entries"]
    return keys + [k for k in sorted(old_e.keys() | new_e.keys()) if old_e.get(k) != new_e.get(k)]


def _lock_runtimes(settings: Settings, only: str | None, resolved: dict, check: bool) -> list[str]:
    from orchestrator.lock.runtime import lock_runtimes, save_runtime_lock

    stale = []
    with working("lock: recipes' runtime requirements"):
        files = lock_runtimes(settings.locks_dir, settings.recipes_dir, only, resolved,
                              settings.flag("upgrade"), settings.vars.get("recipe") or None)
    for path, text in files:
        before = path.read_text() if path.is_file() else None
        if before == text:
            console.print(f"{path}: unchanged")
        elif check:
            what = ", ".join(changed_entries(before, text)[:4])
            console.print(f"{path}: would change ({what})", markup=False)
            stale.append(f"{path.name} ({what})")
        else:
            save_runtime_lock(path, text)
            console.print(f"{path}: written ({len(json.loads(text)['entries'])} entries)")
    return stale


def cmd_lock(settings: Settings) -> None:
    only = settings.vars.get("lock")
    check = settings.flag("check")
    stale: list[str] = []
    if settings.vars.get("recipe"):  # its [runtime] requires only, against its lock as it is
        stale = _lock_runtimes(settings, None, {}, check)
        if stale:
            raise CheckFailed(f"lock check: re-resolving would change {'; '.join(stale)}; run "
                              "`doit lock` and commit the locks")
        return
    with_git = only in (None, "", "git-sources")
    from orchestrator.sources.git import git_recipes, lock_git_sources
    recipes = git_recipes(settings) if with_git else {}  # an invalid recipe: exit 2 first
    what = f"locks/{only}.toml" if only else "locks/*.toml"
    with working(f"lock: resolving {what}"):  # pip's resolver, apt: a minute or more
        resolved = [] if only == "git-sources" else lock_all(settings.locks_dir, only,
                                                             settings.flag("upgrade"))
    for lock in resolved:
        path = lock_path(settings.locks_dir, lock.name)
        before = path.read_text() if path.is_file() else None
        if before == render_lock(lock):
            console.print(f"{path}: unchanged ({len(lock.entries)} entries)")
        elif check:
            what = ", ".join(changed_entries(before, render_lock(lock))[:4])
            console.print(f"{path}: would change ({what})", markup=False)
            stale.append(f"{path.name} ({what})")
        else:
            save_lock(settings.locks_dir, lock)
            console.print(f"{path}: written ({len(lock.entries)} entries)")
    if only != "git-sources":  # recipes' [runtime] requires → locks/runtime/<recipe>.lock.json
        stale += _lock_runtimes(settings, only, {lk.name: lk for lk in resolved}, check)
    if with_git:  # git sources: rev → commit (locks/git-sources.json)
        with working("lock: git sources (rev → commit)"):
            git = lock_git_sources(settings, Store(settings.store_root), recipes, check=check)
        if check and git is not None:
            stale.append(git)
    if stale:
        raise CheckFailed(f"lock check: re-resolving would change {'; '.join(stale)}; run "
                          "`doit lock` and commit the locks")
