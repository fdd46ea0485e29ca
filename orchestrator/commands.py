"""The verbs behind `doit <task>`: each takes Settings, does one thing, prints its result."""
from __future__ import annotations

import json
import time

from rich.table import Table

from orchestrator import store_usage
from orchestrator.builders import launcher
from orchestrator.console import console, print_total
from orchestrator.errors import UserError
from orchestrator.hashing import pretty_json
from orchestrator.lock.files import load_lock, lock_path, render_lock, save_lock
from orchestrator.lock.resolve import lock_all
from orchestrator.model.recipe import load_recipe
from orchestrator.realise import Realised, realise
from orchestrator.settings import Settings, parse_bool
from orchestrator.store import Store
from orchestrator.store_usage import mtime_iso, source_revision, tree_size
from orchestrator.toolchain import ensure_toolchain
from orchestrator.workspace import Workspace


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
    from orchestrator import ide
    ide.refresh_if_managed(settings)  # F5 builds/debugs the now-active artifact, not the old one
    emit(settings, {"generation": gen, "path": str(target)},
         f"rolled back: {settings.workspace} generation {gen} → {target.name if target else '?'}")


def artifact_row(store: Store, path) -> dict:
    m = store.read_manifest(path)
    return {"id": m.id, "recipe": m.recipe, "variant": m.variant, "size": m.total_size(),
            "files": len(m.files), "path": str(path), "origin": m.origin.get("kind", "?"),
            "verify": (m.verify or {}).get("ok"), "date": mtime_iso(path / "manifest.json"),
            "build_s": round(sum(m.timings.get(k, 0.0) for k in ("build_s", "verify_s")), 1)
            if m.timings else None,
            "source": source_revision(m.derivation)}


def status_data(settings: Settings) -> dict:
    """Everything `doit status` shows (format=json prints exactly this)."""
    store = store_of(settings)
    ws = Workspace(settings.workspace)
    active = ws.current()
    rows = [artifact_row(store, p) for p in store.artifacts()]
    cur = ws.current_generation()
    gens = [{"generation": n, "date": mtime_iso(ws.orch / f"profile-{n}-link"),
             "artifact": target.name, "current": n == cur, "present": target.is_dir()}
            for n, target in ws.generations().items()]
    toolchains = [{"name": p.name, "size": tree_size(p.resolve()), "path": str(p),
                   "link": str(p.resolve()) if p.is_symlink() else None}
                  for p in sorted(store.toolchains_dir.iterdir())] \
        if store.toolchains_dir.is_dir() else []
    trees = [{"name": p.name, "size": tree_size(p), "path": str(p)}
             for p in sorted(store.build_dir.iterdir())] if store.build_dir.is_dir() else []
    return {"workspace": str(ws.root), "generation": cur, "generations": gens,
            "active": next((r for r in rows if active and r["path"] == str(active)), None),
            "store": str(store.root), "artifacts": rows, "toolchains": toolchains,
            "build_trees": trees,
            "compile_cache": dict(zip(("bytes", "files"),
                                      launcher.local_usage(store.root / "ccache")),
                                  dir=str(store.root / "ccache"),
                                  sccache=dict(zip(("bytes", "files"),
                                                   launcher.local_usage(store.root / "sccache")),
                                               dir=str(store.root / "sccache")))}


def mb(n: int) -> str:
    return f"{n / 1e6:.1f}"


def cmd_status(settings: Settings) -> None:
    data = status_data(settings)
    if settings.fmt == "json":
        print(pretty_json(data), end="")
        return
    a = data["active"]
    console.print(f"active: {a['recipe']} {a['variant']} {a['id']} ({mb(a['size'])} MB, "
                  f"generation {data['generation']})" if a else f"active: none in {data['workspace']}")
    if data["generations"]:
        console.print(f"generations of {data['workspace']}:")
        gt = Table(show_edge=False, box=None, pad_edge=False)
        for col in ("", "gen", "date", "artifact"):
            gt.add_column(col, overflow="fold")
        for g in data["generations"]:
            gt.add_row("*" if g["current"] else "", str(g["generation"]), g["date"] or "?",
                       g["artifact"] + ("" if g["present"] else " (deleted)"))
        console.print(gt)
    console.print(f"store {data['store']}:")
    table = Table(show_edge=False, box=None, pad_edge=False)
    for col in ("", "recipe", "variant", "id", "date", "build s", "source", "MB", "origin"):
        table.add_column(col, overflow="fold")
    for r in data["artifacts"]:
        table.add_row("*" if data["active"] is r else "", r["recipe"], r["variant"], r["id"][:12],
                      r["date"] or "?", "" if r["build_s"] is None else f"{r['build_s']:.1f}",
                      r["source"], mb(r["size"]), r["origin"])
    console.print(table)
    for t in data["toolchains"]:
        console.print(f"toolchain {t['name'][:12]}: {mb(t['size'])} MB"
                      + (f" (→ {t['link']})" if t["link"] else ""))
    for b in data["build_trees"]:
        console.print(f"build tree {b['name']}: {mb(b['size'])} MB")
    cc = data["compile_cache"]
    console.print(f"compile cache: {mb(cc['bytes'])} MB in {cc['files']} files ({cc['dir']})")
    if (sc := cc["sccache"])["files"]:
        console.print(f"compile cache (sccache): {mb(sc['bytes'])} MB in {sc['files']} files "
                      f"({sc['dir']})")


def cmd_gc(settings: Settings) -> None:
    raw = settings.vars.get("keep", "1")
    try:
        keep = int(raw)
        if keep < 0:
            raise ValueError
    except ValueError:
        raise UserError(f"keep={raw!r} is not a non-negative integer") from None
    dry_run = parse_bool("dry_run", settings.vars.get("dry_run", "0"))
    ccache_max, ccache_older = launcher.trim_request(settings.vars)
    store = store_of(settings)
    doomed, notes = store_usage.gc_plan(settings, store, keep)
    freed = store_usage.freed_bytes(d.path for d in doomed)
    verb = "would delete" if dry_run else "deleted"
    if not dry_run:
        store_usage.apply(store, doomed)
        cache_line = launcher.trim(store.root, ccache_max, ccache_older)
    else:
        cache_line = "compile cache: untouched (dry run)"
    data = {"dry_run": dry_run, "freed_bytes": freed,
            "deleted": [{"kind": d.kind, "path": str(d.path), "why": d.why} for d in doomed],
            "notes": notes,
            "compile_cache_bytes": launcher.local_usage(store.root / "ccache")[0]}
    lines = [f"gc: {verb} {len(doomed)} entries, {mb(freed)} MB"
             + (" would be freed" if dry_run else " freed")]
    lines += [f"  {d.kind}: {d.path.name} ({d.why})" for d in doomed]
    lines += [f"  note: {n}" for n in notes]
    emit(settings, data, "\n".join(lines + [cache_line]))
