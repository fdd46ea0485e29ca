"""A nightly run's bookkeeping: where reports go, run ids, whether to push, and one cell run
as its own `doit nightly cell=` process (what a CI engine's matrix job runs)."""
from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

from orchestrator.bot.cell import tail, write_cell
from orchestrator.bot.matrix import Cell, cell_path, config_path
from orchestrator.config.settings import Settings
from orchestrator.errors import UserError
from orchestrator.model.nightly import NightlyConfig
from orchestrator.store.artifacts import Store

# Variables a local run hands on to its cell processes (the rest are the run's own).
PASSED_ON = ("substitute", "compile_cache", "distcc_hosts", "keep_going")


def reports_dir(settings: Settings, store: Store) -> Path:
    return Path(settings.vars.get("reports") or store.paths.reports).expanduser().absolute()


def push_of(settings: Settings, config: NightlyConfig) -> bool:
    return settings.flag("push", config.push)


def new_run_id(reports: Path) -> str:
    base = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    run, n = base, 1
    while (reports / "runs" / run).exists():
        n += 1
        run = f"{base}-{n}"
    return run


def latest_run(reports: Path) -> str:
    runs = [p for p in (reports / "runs").glob("*/cells") if p.is_dir()]
    if not runs:
        raise UserError(f"no cell results under {reports / 'runs'}; run `doit nightly cell=...` "
                        "first or pass reports=PATH")
    return max(runs, key=lambda p: p.stat().st_mtime).parent.name


def cell_process(settings: Settings, cell: Cell, run: str, reports: Path, push: bool,
                  build_jobs: int) -> int:
    """`doit nightly cell=...` as its own process (exactly what a CI job runs); its output
    goes to runs/<run>/logs/<cell>.log."""
    args = [f"cell={cell.name}", f"run={run}", f"reports={reports}", f"store={settings.store_root}",
            f"config={config_path(settings).absolute()}", f"push={int(push)}", f"jobs={build_jobs}"]
    args += [f"{k}={settings.vars[k]}" for k in PASSED_ON if k in settings.vars]
    log = reports / "runs" / run / "logs" / f"{cell.key}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "MAX_JOBS"}
    with open(log, "w") as out:
        proc = subprocess.run([sys.executable, "-m", "doit", "-f", str(settings.repo_root / "dodo.py"),
                               "nightly", *args], cwd=settings.repo_root, env=env,
                              stdout=out, stderr=subprocess.STDOUT)
    if proc.returncode not in (0, 1) or not cell_path(reports, run, cell).is_file():
        # The process could not even record a result (bad input, killed): record that.
        text = log.read_text(errors="replace")
        write_cell(reports, run, cell, {
            "recipe": cell.recipe, "variant": cell.variant, "cell": cell.name,
            "requires_gpu": cell.requires_gpu, "status": "failed", "stage": "cell",
            "error": f"`doit nightly cell={cell.name}` exited {proc.returncode} without a result",
            "tail": tail(text)})
    return proc.returncode
