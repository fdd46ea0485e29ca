"""`doit lock`: resolve locks/*.toml into locks/*.lock.json (lock=NAME for one, lock=git-sources
for the git sources' rev → commit pins)."""
from __future__ import annotations

from orchestrator.console import console
from orchestrator.lock.files import lock_path, render_lock, save_lock
from orchestrator.lock.resolve import lock_all
from orchestrator.settings import Settings
from orchestrator.store import Store


def cmd_lock(settings: Settings) -> None:
    only = settings.vars.get("lock")
    with_git = only in (None, "", "git-sources")
    from orchestrator.sources.git import git_recipes, lock_git_sources
    recipes = git_recipes(settings) if with_git else {}  # an invalid recipe: exit 2 first
    for lock in [] if only == "git-sources" else lock_all(settings.locks_dir, only):
        path = lock_path(settings.locks_dir, lock.name)
        before = path.read_text() if path.is_file() else None
        if before == render_lock(lock):
            console.print(f"{path}: unchanged ({len(lock.entries)} entries)")
        else:
            save_lock(settings.locks_dir, lock)
            console.print(f"{path}: written ({len(lock.entries)} entries)")
    if with_git:  # git sources: rev → commit (locks/git-sources.json)
        lock_git_sources(settings, Store(settings.store_root), recipes)
