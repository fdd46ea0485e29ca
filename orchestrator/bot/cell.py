"""One matrix cell: (track the branch head), build or substitute, verify, switch into a bot
workspace, smoke-test through .orch/env.sh, (push); its result written atomically to
<reports>/runs/<run>/cells/<recipe>@<variant>.json, where `doit nightly report` finds it.

Statuses: ok | failed (with `stage`: source, build, verify, smoke, push, and `error` plus
`tail`, the last lines of the failure) | skipped (with `reason`, e.g. a GPU cell where no GPU
is visible: built and verified, smoke tests not run).
"""
from __future__ import annotations

import datetime as dt
import shutil
import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from orchestrator.bot.abi_diff import highest_glibc, store_summary
from orchestrator.bot.matrix import Cell, cell_path
from orchestrator.bot.provenance import host, repo_state
from orchestrator.config.settings import Settings
from orchestrator.errors import CheckFailed, UserError
from orchestrator.fs import write_atomic
from orchestrator.hashing import pretty_json
from orchestrator.model.nightly import MatrixEntry
from orchestrator.model.recipe import load_recipe
from orchestrator.realise.steps import StepFailed, run_steps
from orchestrator.store.artifacts import Store
from orchestrator.workspace.activate import activate
from orchestrator.workspace.profiles import Workspace

TAIL_LINES = 25


def tail(text: str | None, lines: int = TAIL_LINES) -> str:
    """The last non-blank lines of a failure's output."""
    return "\n".join([ln for ln in (text or "").splitlines() if ln.strip()][-lines:])


def gpu_visible() -> tuple[bool, str]:
    """(visible, why not): `nvidia-smi -L` must list a GPU."""
    if shutil.which("nvidia-smi") is None:
        return False, "no GPU visible: nvidia-smi not found"
    try:
        proc = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return False, "no GPU visible: nvidia-smi -L timed out"
    if proc.returncode != 0 or "GPU" not in proc.stdout:
        last = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no output"]
        return False, f"no GPU visible: nvidia-smi -L exit {proc.returncode}: {last[0][:200]}"
    return True, proc.stdout.strip().splitlines()[0]


def track_branch(settings: Settings, store: Store, cell: Cell) -> tuple[Settings, dict[str, Any]]:
    """Resolve the branch head now; settings that build it instead of the pinned commit."""
    from orchestrator.model.source_git import GitSource
    from orchestrator.sources.git import lock_entry, read_git_lock

    recipe = load_recipe(settings.recipes_dir, cell.recipe)
    assert isinstance(recipe.source, GitSource) and cell.track is not None
    entry = lock_entry(store, cell.recipe, recipe.source.model_copy(update={"rev": cell.track}))
    pinned = read_git_lock(settings).get(cell.recipe, {}).get("commit")
    source = {"url": entry["url"], "branch": cell.track, "commit": entry["commit"],
              "tree": entry["tree"], "pinned_commit": pinned}
    tracked = {**settings.tracked_sources, cell.recipe: entry}
    return replace(settings, tracked_sources=tracked), source


def smoke(ws: Workspace, entry: MatrixEntry, values: dict[str, str]) -> list[dict[str, Any]]:
    results = []
    for template in entry.smoke:
        cmd = template.format(**values)
        t0 = time.monotonic()
        try:
            proc = subprocess.run(["bash", "-c", f". '{ws.env_script}' && {cmd}"],
                                  capture_output=True, text=True, timeout=entry.timeout_s)
            rc, out = proc.returncode, (proc.stdout + proc.stderr)[-4000:]
        except subprocess.TimeoutExpired:
            rc, out = 124, f"timed out after {entry.timeout_s}s"
        results.append({"command": cmd, "exit": rc, "seconds": round(time.monotonic() - t0, 2),
                        "output_tail": out})
        if rc != 0:
            break  # later commands assume the earlier ones passed
    return results


def _failed(cell: dict[str, Any], stage: str, error: str, report: str | None, t0: float) -> dict[str, Any]:
    return {**cell, "status": "failed", "stage": stage, "error": error.splitlines()[0] if error else "",
            "tail": tail(report or error), "seconds": round(time.monotonic() - t0, 2)}


def build_times(origin: str, build_s: float | None) -> dict[str, Any]:
    """The artifact's build time is this night's only when this night built it."""
    return {"build_seconds": build_s} if origin == "built" else {"original_build_seconds": build_s}


def run_cell(settings: Settings, store: Store, reports: Path, cell: Cell, entry: MatrixEntry,
             push: bool) -> dict[str, Any]:
    """Run one cell; never raises for a failure of the cell itself."""
    t0 = time.monotonic()
    result: dict[str, Any] = {"recipe": cell.recipe, "variant": cell.variant, "cell": cell.name,
                              "requires_gpu": cell.requires_gpu, "status": "ok",
                              "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                              "host": host(), "repo": repo_state(settings.repo_root)}
    if entry.targets:  # a partial build, as `doit build targets=...`
        settings = replace(settings, vars={**settings.vars, "targets": ",".join(entry.targets)})
        result["targets"] = entry.targets
    if cell.track:
        try:
            settings, result["source"] = track_branch(settings, store, cell)
        except UserError as e:
            return _failed(result, "source", str(e), None, t0)
    try:  # the steps of cli.graph's tasks, in order (realise/steps.py)
        r = run_steps(settings, store, cell.recipe, cell.variant)
    except StepFailed as e:
        stage = "build" if e.step in ("toolchain", "commit") else e.step
        return _failed(result, stage, str(e), getattr(e.cause, "report", None), t0)
    manifest = Store.read_manifest(r.path)
    abi = store_summary(reports, r.plan.artifact_id, r.path)
    verify = manifest.verify or {}
    result.update({"id": r.plan.artifact_id, "origin": r.origin, "path": str(r.path),
                   "size": manifest.total_size(), "glibc": highest_glibc(abi),
                   **build_times(r.origin, (manifest.timings or {}).get("build_s")),
                   "verify": {k: verify[k] for k in ("ok", "checks", "failures", "first_failures",
                                                     "max_versions", "forced") if k in verify}})
    ws_dir = store.paths.bot_workspaces / cell.key
    ws_dir.mkdir(parents=True, exist_ok=True)
    ws = Workspace(ws_dir)
    activate(ws, store, r)
    if cell.requires_gpu and entry.smoke:
        visible, why = gpu_visible()
        if not visible:
            return {**result, "status": "skipped", "stage": "smoke",
                    "reason": f"{why}; built and verified, smoke tests not run",
                    "seconds": round(time.monotonic() - t0, 2)}
        result["gpu"] = why
    result["smoke"] = smoke(ws, entry, {"recipe": cell.recipe, "variant": cell.variant,
                                        "build_type": r.plan.variant.build_type})
    bad = next((s for s in result["smoke"] if s["exit"] != 0), None)
    if bad is not None:
        return _failed(result, "smoke", f"`{bad['command']}` exited {bad['exit']}: "
                       f"{tail(bad['output_tail'], 1)}", bad["output_tail"], t0)
    if entry.bench:  # performance, tracked over the nights (orchestrator.bench.trend)
        from orchestrator.bench.sides import realised_side
        from orchestrator.bench.trend import sample_cell
        try:
            result["bench"] = sample_cell(realised_side(r, cell.variant), entry)
        except (UserError, CheckFailed) as e:
            return _failed(result, "bench", str(e), getattr(e, "report", None), t0)
    if push:
        from orchestrator.cache.cache_toml import load_config
        from orchestrator.cache.push import push_many
        from orchestrator.cache.signing import load_signing_key
        try:
            config = load_config(settings.repo_root)
            [record] = push_many([r.path], config, load_signing_key())
            result["pushed"] = {"url": config.push_url, "record": record.name}
        except (UserError, CheckFailed) as e:
            return _failed(result, "push", str(e), getattr(e, "report", None), t0)
    return {**result, "seconds": round(time.monotonic() - t0, 2)}


def write_cell(reports: Path, run: str, cell: Cell, result: dict[str, Any]) -> Path:
    path = cell_path(reports, run, cell)
    write_atomic(path, pretty_json({**result, "run": run}))
    return path
