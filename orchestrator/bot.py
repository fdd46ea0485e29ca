"""The nightly build bot: build the variant matrix, verify, smoke-test, push, report.

Every matrix cell runs through the same realise() as `doit build` (so verification gates
it), then is switched into a bot-owned workspace and smoke-tested through the env script,
exactly as a developer would use it. One failing cell never stops the others; the run's
exit status is 1 if any cell failed. Reports: <reports>/nightly-<UTC stamp>.json per run,
history.json (the last N runs) and index.md (a table people read).
"""
from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestrator.commands import activate
from orchestrator.console import console
from orchestrator.errors import CheckFailed, UserError
from orchestrator.hashing import pretty_json
from orchestrator.model.nightly import MatrixEntry, NightlyConfig
from orchestrator.model.recipe import describe_validation_error
from orchestrator.model.user_file import read_toml
from orchestrator.realise import realise
from orchestrator.settings import Settings
from orchestrator.store import Store, write_atomic
from orchestrator.workspace import Workspace


def load_nightly(path: Path) -> NightlyConfig:
    if not path.is_file():
        raise UserError(f"no bot config {path}; create it or pass config=PATH")
    data = read_toml(path, "fix the bot config")
    try:
        return NightlyConfig.model_validate(data)
    except ValidationError as e:
        raise UserError(f"{path}: {describe_validation_error(e)}; fix the bot config") from None


def gpu_visible() -> bool:
    return shutil.which("nvidia-smi") is not None and subprocess.run(
        ["nvidia-smi", "-L"], capture_output=True).returncode == 0


def smoke(ws: Workspace, entry: MatrixEntry, values: dict[str, str]) -> list[dict[str, Any]]:
    results = []
    for template in entry.smoke:
        cmd = template.format(**values)
        t0 = time.monotonic()
        try:
            proc = subprocess.run(["bash", "-c", f". '{ws.env_script}' && {cmd}"],
                                  capture_output=True, text=True, timeout=entry.timeout_s)
            rc, out = proc.returncode, (proc.stdout + proc.stderr)[-2000:]
        except subprocess.TimeoutExpired:
            rc, out = 124, f"timed out after {entry.timeout_s}s"
        results.append({"command": cmd, "exit": rc, "seconds": round(time.monotonic() - t0, 2),
                        "output_tail": out})
    return results


def run_cell(settings: Settings, store: Store, entry: MatrixEntry, variant: str,
             push: bool, ws_root: Path) -> dict[str, Any]:
    cell: dict[str, Any] = {"recipe": entry.recipe, "variant": variant, "status": "ok"}
    if entry.requires_gpu and not gpu_visible():
        return {**cell, "status": "skipped", "reason": "no GPU visible (nvidia-smi)"}
    t0 = time.monotonic()
    try:
        r = realise(settings, store, entry.recipe, variant)
    except (UserError, CheckFailed) as e:
        return {**cell, "status": "failed", "stage": "build", "error": str(e),
                "seconds": round(time.monotonic() - t0, 2)}
    manifest = Store.read_manifest(r.path)
    cell.update({"id": r.plan.artifact_id, "origin": r.origin, "path": str(r.path),
                 "size": manifest.total_size(), "verify": manifest.verify,
                 "build_seconds": round(time.monotonic() - t0, 2)})
    ws_dir = ws_root / f"{entry.recipe}-{variant}"
    ws_dir.mkdir(parents=True, exist_ok=True)
    ws = Workspace(ws_dir)
    activate(ws, store, r)
    cell["smoke"] = smoke(ws, entry, {"recipe": entry.recipe, "variant": variant,
                                      "build_type": r.plan.variant.build_type})
    if any(s["exit"] != 0 for s in cell["smoke"]):
        return {**cell, "status": "failed", "stage": "smoke"}
    if push:
        from orchestrator.cache.config import load_config
        from orchestrator.cache.push import push_many
        from orchestrator.cache.signing import load_signing_key
        try:
            config = load_config(settings.repo_root)
            [record] = push_many([r.path], config, load_signing_key())
            cell["pushed"] = {"url": config.push_url, "record": record.name}
        except (UserError, CheckFailed) as e:
            return {**cell, "status": "failed", "stage": "push", "error": str(e)}
    return cell


def render_index(history: list[dict[str, Any]]) -> str:
    lines = ["# Nightly builds", "", "| run (UTC) | cell | status | id | origin | seconds |",
             "|---|---|---|---|---|---|"]
    for run in reversed(history):
        for c in run["cells"]:
            lines.append(f"| {run['started']} | {c['recipe']}/{c['variant']} | {c['status']}"
                         f"{' (' + c['stage'] + ')' if c.get('stage') else ''} | "
                         f"{c.get('id', '')[:12]} | {c.get('origin', '')} | "
                         f"{c.get('build_seconds', '')} |")
    return "\n".join(lines) + "\n"


def cmd_nightly(settings: Settings) -> dict[str, Any]:
    config = load_nightly(Path(settings.vars.get("config") or settings.repo_root / "nightly.toml"))
    store = Store(settings.store_root).ensure()
    reports = Path(settings.vars.get("reports") or store.root / "reports").absolute()
    push = config.push if "push" not in settings.vars else settings.vars["push"] not in ("0", "")
    started = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    cells = []
    for entry in config.matrix:
        for variant in entry.variants:
            console.rule(f"nightly: {entry.recipe} {variant}")
            cell = run_cell(settings, store, entry, variant, push, store.root / "bot-workspaces")
            console.print(f"{entry.recipe} {variant}: [bold]{cell['status']}[/]"
                          + (f" at {cell['stage']}: {cell.get('error', '')}" if cell.get("stage") else ""))
            cells.append(cell)
    run = {"started": started, "cells": cells,
           "ok": all(c["status"] in ("ok", "skipped") for c in cells)}
    reports.mkdir(parents=True, exist_ok=True)
    write_atomic(reports / f"nightly-{started}.json", pretty_json(run))
    hist_path = reports / "history.json"
    history = json.loads(hist_path.read_text()) if hist_path.is_file() else []
    history = (history + [{k: run[k] for k in ("started", "ok", "cells")}])[-config.history:]
    write_atomic(hist_path, pretty_json(history))
    write_atomic(reports / "index.md", render_index(history))
    console.print(f"report: {reports / f'nightly-{started}.json'}")
    if not run["ok"]:
        failed = [f"{c['recipe']}/{c['variant']} ({c['stage']})" for c in cells if c["status"] == "failed"]
        raise CheckFailed(f"nightly: {len(failed)} cell(s) failed: {', '.join(failed)}; "
                          f"report in {reports}")
    return run
