"""`doit gc`: delete what no kept generation needs (artifacts, toolchains, build trees,
sources) and trim the compile cache; dry_run=1 shows it and deletes nothing."""
from __future__ import annotations

import os
from pathlib import Path

from orchestrator import fault_point
from orchestrator.builders.compile_cache import gc as compile_cache_gc
from orchestrator.config import cli_vars
from orchestrator.config.settings import Settings
from orchestrator.console import working
from orchestrator.errors import UserError
from orchestrator.store import roots_lock
from orchestrator.store.artifacts import Store
from orchestrator.verbs import gc_planner
from orchestrator.verbs.output import emit, mb, short_name


def cmd_gc(settings: Settings) -> None:
    raw = settings.vars.get("keep", cli_vars.VARS["keep"].default)
    try:
        keep = int(raw)
        if keep < 0:
            raise ValueError
    except ValueError:
        raise UserError(f"keep={raw!r} is not a non-negative integer") from None
    dry_run = settings.flag("dry_run")
    ccache_max, ccache_older = compile_cache_gc.trim_request(settings.vars)
    store = Store(settings.store_root)
    with roots_lock.holding(store.root, exclusive=True):  # no commit or link meanwhile
        with working("gc: what no kept generation needs, and its size"):
            need = gc_planner.needed(settings, store, keep)
            doomed, notes = gc_planner.gc_plan(settings, store, keep, need)
            freed = gc_planner.freed_bytes(d.path for d in doomed)
        fault_point.pause("gc-planned")
        gone = {d.path for d in doomed}
        kept = [{"kind": "artifact", "path": str(a),
                 "roots": need.kept_by.get(Path(os.path.realpath(a)), [])}
                for a in store.artifacts() if a not in gone]
        if not dry_run:
            with working(f"gc: deleting {len(doomed)} entries"):
                gc_planner.apply(store, doomed)
    verb = "would delete" if dry_run else "deleted"
    if not dry_run:
        with working("gc: trimming the compile cache"):
            cache_line = compile_cache_gc.trim(store.root, ccache_max, ccache_older)
    else:
        cache_line = "compile cache: untouched (dry run)"
    data = {"dry_run": dry_run, "freed_bytes": freed,
            "deleted": [{"kind": d.kind, "path": str(d.path), "why": d.why} for d in doomed],
            "kept": kept,
            "notes": notes,
            "compile_cache_bytes": compile_cache_gc.local_usage(store.paths.ccache)[0]}
    lines = [f"gc: {verb} {len(doomed)} entries, {mb(freed)} MB"
             + (" would be freed" if dry_run else " freed")]
    lines += [f"  {d.kind}: {short_name(d.path.name)} ({d.why})" for d in doomed]
    if dry_run:  # what stays, and the root that keeps it
        lines.append(f"gc: would keep {len(kept)} artifact(s)")
        lines += [f"  artifact: {short_name(Path(k['path']).name)} (kept by "
                  f"{'; '.join(k['roots']) or 'no root: in use'})" for k in kept]
    lines += [f"  note: {n}" for n in notes]
    emit(settings, data, "\n".join(lines + [cache_line]))
