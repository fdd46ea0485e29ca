"""`doit nightly` and its fan-out forms (what a CI engine's matrix calls):

  doit nightly matrix format=json   the cells as a JSON list (one object per cell)
  doit nightly cell=R/V run=ID      run one cell; its result goes to <reports>/runs/ID/cells/
  doit nightly report run=ID        merge ID's cell results: nightly-ID.json, history, index.*
  doit nightly [jobs=N]             all of it here: every cell as its own `doit nightly cell=`
                                    process, N at a time, then the report
  doit nightly buildbot [master=D]  write a Buildbot master (D/master.cfg) from nightly.toml

nightly.toml is checked completely first, whatever the form. Exit 1 when a cell (or the
merged run) failed, 2 for bad input.
"""
from __future__ import annotations

import datetime as dt
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rich.markup import escape

from orchestrator.bot.cell import run_cell, write_cell
from orchestrator.bot.matrix import Cell, cell_path, check_run_id, config_path, entry_of, find_cell, load_matrix
from orchestrator.bot.notify import check_url, post
from orchestrator.bot.preflight import preflight
from orchestrator.bot.report import console_lines, merge, read_history, render_markdown, summary_json
from orchestrator.bot.report_html import render_html
from orchestrator.bot.runs import cell_process, latest_run, new_run_id, push_of, reports_dir
from orchestrator.bot.states import fails_night
from orchestrator.config.settings import Settings
from orchestrator.console import console
from orchestrator.errors import CheckFailed, UserError
from orchestrator.fs import write_atomic
from orchestrator.model.nightly import NightlyConfig
from orchestrator.store.artifacts import Store
from orchestrator.verbs.output import emit


def cmd_matrix(settings: Settings, cells: list[Cell]) -> None:
    if settings.fmt == "json":
        emit(settings, [c.as_json() for c in cells])
        return
    for c in cells:
        console.print(f"{c.name:<40} {'gpu' if c.requires_gpu else 'cpu'}"
                      + (f"  track {c.track}" if c.track else ""))


def cmd_cell(settings: Settings, config: NightlyConfig, cells: list[Cell], name: str) -> dict[str, Any]:
    cell = find_cell(cells, name, config_path(settings).name)
    preflight(settings, [cell], push_of(settings, config))  # before anything is built or written
    store = Store(settings.store_root).ensure()
    reports = reports_dir(settings, store)
    run = check_run_id(settings.vars.get("run") or dt.datetime.now(dt.UTC).strftime("%Y%m%d"))
    console.rule(f"nightly {run}: {cell.name}")
    result = run_cell(settings, store, reports, cell, entry_of(config, cell), push_of(settings, config))
    path = write_cell(reports, run, cell, result)
    [line, *rest] = console_lines({"cells": [result]})
    console.print(f"[bold]{escape(line)}[/]", soft_wrap=True)
    for r in rest:
        console.print(r, markup=False, soft_wrap=True)
    console.print(f"cell result: {path}")
    emit(settings, result)
    if fails_night(result, config.fail_on):
        raise CheckFailed(f"nightly cell {cell.name} failed at {result['stage']}: {result['error']}")
    return result


def cmd_report(settings: Settings, config: NightlyConfig, cells: list[Cell], run: str | None,
               reports: Path) -> dict[str, Any]:
    notify = check_url(settings.vars["notify"]) if settings.vars.get("notify") else None
    run = check_run_id(run or settings.vars.get("run") or latest_run(reports))
    merged = merge(reports, run, cells, config.history, config.fail_on)
    history = read_history(reports)
    write_atomic(reports / "index.md", render_markdown(history, merged))
    write_atomic(reports / "index.html", render_html(history, merged))
    console.rule(f"nightly {run}: {'ok' if merged['ok'] else 'FAILED'}")
    for line in console_lines(merged):
        console.print(line, markup=False, soft_wrap=True)
    console.print(f"report: {reports / f'nightly-{run}.json'}  page: {reports / 'index.html'}")
    if notify:
        why = post(notify, summary_json(merged, reports))
        console.print(f"notified {notify}" if why is None else f"[yellow]warning:[/] notify={notify}: {escape(why)}")
    emit(settings, merged)
    if not merged["ok"]:
        bad = [c for c in merged["cells"] if fails_night(c, config.fail_on)]
        raise CheckFailed(f"nightly: {len(bad)} cell(s) failed: "
                          + ", ".join(f"{c['cell']} ({'abi' if c['state'] == 'abi' else c.get('stage', c['status'])})"
                                      for c in bad)
                          + f"; report in {reports}")
    return merged


def cmd_all(settings: Settings, config: NightlyConfig, cells: list[Cell]) -> dict[str, Any]:
    push = push_of(settings, config)
    preflight(settings, cells, push)  # before any cell builds, before anything is written
    store = Store(settings.store_root).ensure()
    reports = reports_dir(settings, store)
    if settings.vars.get("notify"):
        check_url(settings.vars["notify"])
    run = check_run_id(settings.vars["run"]) if settings.vars.get("run") else new_run_id(reports)
    (reports / "runs" / run / "cells").mkdir(parents=True, exist_ok=True)
    parallel = settings.jobs if "jobs" in settings.vars else 1
    build_jobs = max(1, (os.cpu_count() or 1) // parallel)
    console.print(f"nightly {run}: {len(cells)} cells, {parallel} at a time; logs in "
                  f"{reports / 'runs' / run / 'logs'}")

    def one(cell: Cell) -> None:
        rc = cell_process(settings, cell, run, reports, push, build_jobs)
        result = json.loads(cell_path(reports, run, cell).read_text())
        [line, *_] = console_lines({"cells": [result]})
        console.print(f"{line}  (exit {rc})", markup=False, soft_wrap=True)

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        list(pool.map(one, cells))
    return cmd_report(settings, config, cells, run, reports)


def cmd_nightly(settings: Settings, words: list[str] | None = None) -> dict[str, Any] | None:
    """The `doit nightly` verb: dispatch on the positional word and cell=."""
    words = list(words or [])
    if len(words) > 1 or (words and words[0] not in ("matrix", "report", "buildbot")):
        raise UserError(f"doit nightly {' '.join(words)[:80]}: use `doit nightly`, `doit nightly "
                        "matrix`, `doit nightly report`, `doit nightly buildbot` or "
                        "`doit nightly cell=RECIPE/VARIANT`")
    if words and "cell" in settings.vars:
        raise UserError(f"doit nightly {words[0]} does not take cell=; drop one of them")
    config, cells = load_matrix(settings)  # everything checked before anything runs
    if words == ["matrix"]:
        cmd_matrix(settings, cells)
        return None
    if words == ["buildbot"]:
        from orchestrator.bot.buildbot_cfg import write_master
        path = write_master(settings, config, cells)
        console.print(f"Buildbot master configuration: {path} "
                      f"(`buildbot create-master {path.parent}` then `buildbot start {path.parent}`)")
        emit(settings, {"master_cfg": str(path)})
        return None
    if "cell" in settings.vars:
        return cmd_cell(settings, config, cells, settings.vars["cell"])
    if words == ["report"]:
        store = Store(settings.store_root).ensure()
        return cmd_report(settings, config, cells, None, reports_dir(settings, store))
    return cmd_all(settings, config, cells)
