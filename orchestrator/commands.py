"""The verbs behind `doit <task>`: each takes Settings, does one thing, prints its result."""
from __future__ import annotations

import json
import time

from rich.table import Table

from orchestrator.builders import launcher
from orchestrator.console import console, print_total
from orchestrator.errors import UserError
from orchestrator.hashing import pretty_json
from orchestrator.lock.files import load_lock, lock_path, render_lock, save_lock
from orchestrator.lock.resolve import lock_all
from orchestrator.model.recipe import load_recipe
from orchestrator.realise import Realised, realise
from orchestrator.settings import Settings
from orchestrator.store import Store
from orchestrator.toolchain import ensure_toolchain
from orchestrator.workspace import Workspace, gc_roots


def store_of(settings: Settings) -> Store:
    return Store(settings.store_root)


def emit(settings: Settings, data: dict, human: str) -> None:
    """JSON on stdout for format=json, a line for people otherwise."""
    if settings.fmt == "json":
        print(json.dumps(data, sort_keys=True))
    else:
        console.print(human)


def cmd_lock(settings: Settings) -> None:
    only = settings.vars.get("lock")
    for lock in [] if only == "git-sources" else lock_all(settings.locks_dir, only):
        path = lock_path(settings.locks_dir, lock.name)
        before = path.read_text() if path.is_file() else None
        if before == render_lock(lock):
            console.print(f"{path}: unchanged ({len(lock.entries)} entries)")
        else:
            save_lock(settings.locks_dir, lock)
            console.print(f"{path}: written ({len(lock.entries)} entries)")
    if only in (None, "", "git-sources"):  # git sources: rev → commit (locks/git-sources.json)
        from orchestrator.source_git import lock_git_sources
        lock_git_sources(settings, store_of(settings))


def cmd_toolchain(settings: Settings) -> None:
    name = settings.vars.get("lock") or load_recipe(settings.recipes_dir, settings.recipe).lock
    tc = ensure_toolchain(store_of(settings), load_lock(settings.locks_dir, name))
    emit(settings, {"toolchain": str(tc.root), "lock": name},
         f"toolchain {name}: {tc.root}")


def describe(r: Realised) -> str:
    return f"{r.plan.recipe.name} {r.plan.variant_name} {r.plan.artifact_id}: {r.origin} → {r.path}"


def cmd_build(settings: Settings) -> Realised:
    t0 = time.monotonic()
    r = realise(settings, store_of(settings))
    if r.origin == "present":
        msg = f"up to date: {describe(r)} ({time.monotonic() - t0:.2f}s)"
    else:
        msg = describe(r)
    data = {"id": r.plan.artifact_id, "path": str(r.path), "origin": r.origin,
            "recipe": r.plan.recipe.name, "variant": r.plan.variant_name}
    if r.comparison is not None:  # rebuild=1 / check=1
        data["comparison"] = r.comparison
        same = "identical to" if r.comparison["identical"] else "differs from"
        msg += f"; {r.comparison['mode']}: the new build {same} the store"
    emit(settings, data, msg)
    if r.origin != "present":
        print_total(time.monotonic() - t0)
    return r


def activate(ws: Workspace, store: Store, r: Realised) -> tuple[int, bool]:
    """Point ws at a realised artifact, with the toolchain whose python the env script uses."""
    tc = ensure_toolchain(store, r.plan.lock)  # a no-op when present; pulled artifacts need it too
    return ws.switch(r.path, store, tc.root, r.plan.recipe.outputs.model_dump())


def cmd_switch(settings: Settings) -> None:
    store = store_of(settings)
    r = realise(settings, store)
    gen, changed = activate(Workspace(settings.workspace), store, r)
    from orchestrator import ide
    ide.refresh_if_managed(settings, r.plan)  # .vscode/ etc. follow the new variant when managed
    state = "switched" if changed else "already active"
    emit(settings, {"generation": gen, "changed": changed, "path": str(r.path),
                    "id": r.plan.artifact_id, "origin": r.origin},
         f"{state}: {settings.workspace} generation {gen} → {r.plan.recipe.name} "
         f"{r.plan.variant_name} {r.plan.artifact_id} ({r.origin})")


def cmd_rollback(settings: Settings) -> None:
    ws = Workspace(settings.workspace)
    gen = ws.rollback()
    target = ws.current()
    emit(settings, {"generation": gen, "path": str(target)},
         f"rolled back: {settings.workspace} generation {gen} → {target.name if target else '?'}")


def artifact_row(store: Store, path) -> dict:
    m = store.read_manifest(path)
    return {"id": m.id, "recipe": m.recipe, "variant": m.variant, "size": m.total_size(),
            "files": len(m.files), "path": str(path), "origin": m.origin.get("kind", "?"),
            "verify": (m.verify or {}).get("ok")}


def cmd_status(settings: Settings) -> None:
    store = store_of(settings)
    ws = Workspace(settings.workspace)
    active = ws.current()
    rows = [artifact_row(store, p) for p in store.artifacts()]
    data = {"workspace": str(ws.root), "generation": ws.current_generation(),
            "active": next((r for r in rows if active and r["path"] == str(active)), None),
            "store": str(store.root), "artifacts": rows,
            "compile_cache": dict(zip(("bytes", "files"),
                                      launcher.local_usage(store.root / "ccache")),
                                  dir=str(store.root / "ccache"))}
    if settings.fmt == "json":
        print(pretty_json(data), end="")
        return
    if data["active"]:
        a = data["active"]
        console.print(f"active: {a['recipe']} {a['variant']} {a['id']} "
                      f"({a['size'] / 1e6:.1f} MB, generation {data['generation']})")
    else:
        console.print(f"active: none in {ws.root}")
    table = Table(title=f"store {store.root}")
    for col in ("", "recipe", "variant", "id", "size MB", "files", "origin"):
        table.add_column(col)
    for r in rows:
        table.add_row("*" if data["active"] is r else "", r["recipe"], r["variant"], r["id"],
                      f"{r['size'] / 1e6:.1f}", str(r["files"]), r["origin"])
    console.print(table)
    cc = data["compile_cache"]
    console.print(f"compile cache: {cc['bytes'] / 1e6:.1f} MB in {cc['files']} files ({cc['dir']})")


def cmd_gc(settings: Settings) -> None:
    raw = settings.vars.get("keep", "1")
    try:
        keep = int(raw)
        if keep < 0:
            raise ValueError
    except ValueError:
        raise UserError(f"keep={raw!r} is not a non-negative integer") from None
    ccache_max, ccache_older = launcher.trim_request(settings.vars)
    store = store_of(settings)
    deleted = store.gc(gc_roots(store, keep))
    cache_line = launcher.trim(store.root, ccache_max, ccache_older)
    emit(settings, {"deleted": [str(p) for p in deleted],
                    "compile_cache_bytes": launcher.local_usage(store.root / "ccache")[0]},
         f"gc: deleted {len(deleted)} artifact(s)" + "".join(f"\n  {p.name}" for p in deleted)
         + f"\n{cache_line}")
