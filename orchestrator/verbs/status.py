"""`doit status`: the workspace's generations, the store's artifacts, toolchains, build trees
and compile caches (format=json prints exactly what status_data returns)."""
from __future__ import annotations

from pathlib import Path

from orchestrator.builders.compile_cache import gc as compile_cache_gc
from orchestrator.config.settings import Settings
from orchestrator.console import console
from orchestrator.store.artifacts import Store
from orchestrator.verbs.gc_planner import mtime_iso, source_revision, tree_size
from orchestrator.verbs.output import ID_WIDTH, emit, fitted_table, mb, short_name
from orchestrator.workspace.profiles import Workspace


def artifact_row(store: Store, path: Path) -> dict:
    m = store.read_manifest(path)
    return {"id": m.id, "recipe": m.recipe, "variant": m.variant, "size": m.total_size(),
            "files": len(m.files), "path": str(path), "origin": m.origin.get("kind", "?"),
            "verify": (m.verify or {}).get("ok"), "date": mtime_iso(path / "manifest.json"),
            "build_s": round(sum(m.timings.get(k, 0.0) for k in ("build_s", "verify_s")), 1)
            if m.timings else None,
            "source": source_revision(m.derivation)}


def status_data(settings: Settings) -> dict:
    """Everything `doit status` shows (format=json prints exactly this)."""
    store = Store(settings.store_root)
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
                                      compile_cache_gc.local_usage(store.paths.ccache), strict=True),
                                  dir=str(store.paths.ccache),
                                  sccache=dict(zip(("bytes", "files"),
                                                   compile_cache_gc.local_usage(store.paths.sccache),
                                                   strict=True),
                                               dir=str(store.paths.sccache)))}


def cmd_status(settings: Settings) -> None:
    data = status_data(settings)
    if settings.fmt == "json":
        emit(settings, data)
        return
    a = data["active"]
    console.print(f"active: {a['recipe']} {a['variant']} {a['id'][:ID_WIDTH]} ({mb(a['size'])} MB, "
                  f"generation {data['generation']})" if a else f"active: none in {data['workspace']}")
    if data["generations"]:
        console.print(f"generations of {data['workspace']}:")
        console.print(fitted_table(("", "gen", "date", "artifact"), [
            ("*" if g["current"] else "", str(g["generation"]), g["date"] or "?",
             short_name(g["artifact"]) + ("" if g["present"] else " (deleted)"))
            for g in data["generations"]], elastic=("artifact",)))
    console.print(f"store {data['store']}:")
    console.print(fitted_table(
        ("", "recipe", "variant", "id", "date", "secs", "source", "MB", "origin"),
        [("*" if data["active"] is r else "", r["recipe"], r["variant"], r["id"][:ID_WIDTH],
          r["date"] or "?", "" if r["build_s"] is None else f"{r['build_s']:.1f}",
          r["source"], mb(r["size"]), r["origin"]) for r in data["artifacts"]],
        elastic=("source",)))
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
