"""Merge a run's cell results into its report; history, ABI diffs, Markdown, console lines.

Layout under the reports directory:
  runs/<run>/cells/<recipe>@<variant>.json   one result per cell (written by the cell)
  nightly-<run>.json                         the merged run (cells in matrix order)
  history.json                               the last N merged runs (slim cells)
  abi/<artifact id>.json                     ABI summaries (abi_diff)
  index.md, index.html                       for people
Merging is idempotent: merging a run again replaces its entry in the history.
"""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from orchestrator.bench.trend import add_perf, perf_line
from orchestrator.bot import abi_diff
from orchestrator.bot.matrix import Cell, cell_path
from orchestrator.bot.states import (
    MARKS,
    WORDS,
    cell_state,
    fails_night,
    human_seconds,
    human_size,
    mark_gpu_history,
    night_times,
)
from orchestrator.fs import write_atomic
from orchestrator.hashing import pretty_json
from orchestrator.model.store_layout import MANIFEST_NAME

# What the history keeps of a cell (the run report keeps everything).
SLIM_DROP = ("smoke", "path")


def read_cells(reports: Path, run: str, cells: list[Cell]) -> list[dict[str, Any]]:
    """Every cell's result for run, in matrix order; a cell without a result is `missing`."""
    out = []
    for cell in cells:
        p = cell_path(reports, run, cell)
        try:
            out.append(json.loads(p.read_text()))
        except (OSError, ValueError):
            out.append({"recipe": cell.recipe, "variant": cell.variant, "cell": cell.name,
                        "requires_gpu": cell.requires_gpu, "status": "missing",
                        "reason": f"no result in {p.parent} (the cell did not run or did not finish)"})
    return out


def read_history(reports: Path) -> list[dict[str, Any]]:
    p = reports / "history.json"
    try:
        data = json.loads(p.read_text())
        return data if isinstance(data, list) else []
    except (OSError, ValueError):
        return []


def previous_success(history: list[dict[str, Any]], run: str, cell: str) -> dict[str, Any] | None:
    """The latest earlier run's result of `cell` that built (ok, or a skipped GPU smoke)."""
    for h in reversed(history):
        if h["run"] == run:
            continue
        for c in h["cells"]:
            if c.get("cell") == cell and c.get("id") and c["status"] in ("ok", "skipped"):
                return {"run": h["run"], "id": c["id"]}
    return None


def add_abi_diffs(reports: Path, history: list[dict[str, Any]], run: str,
                  results: list[dict[str, Any]]) -> None:
    for c in results:
        if not c.get("id"):
            continue
        prev = previous_success(history, run, c["cell"])
        if prev is None:
            c["abi_diff"] = None
            continue
        old, new = abi_diff.load_summary(reports, prev["id"]), abi_diff.load_summary(reports, c["id"])
        if old is None or new is None:
            c["abi_diff"] = {"against": prev, "error": "ABI summary missing"}
            continue
        c["abi_diff"] = {"against": prev, **abi_diff.diff(old, new)}


def failure_reason(c: dict[str, Any]) -> str:
    """One line: why a cell is not ok ('' when it is)."""
    if c["status"] == "failed":
        return f"{c.get('stage', '?')}: {c.get('error', '')}"
    if c["status"] in ("skipped", "missing"):
        return c.get("reason", "")
    return ""


def cell_links(reports: Path, run: str, c: dict[str, Any]) -> dict[str, str]:
    """Links (relative to the reports directory, or the record's URL) to a cell's files."""
    key = f"{c['recipe']}@{c['variant']}"
    links = {}
    if c["status"] != "missing":
        links["json"] = f"runs/{run}/cells/{key}.json"
    if (reports / "runs" / run / "logs" / f"{key}.log").is_file():
        links["log"] = f"runs/{run}/logs/{key}.log"
    if c.get("pushed") and c.get("id"):
        links["record"] = f"{c['pushed']['url'].rstrip('/')}/ac/{c['id']}.json"
    elif c.get("path"):
        links["record"] = (Path(c["path"]) / MANIFEST_NAME).as_uri()
    return links


def merge(reports: Path, run: str, cells: list[Cell], history_len: int,
          fail_on: list[str]) -> dict[str, Any]:
    """Write nightly-<run>.json and history.json; return the merged run."""
    results = read_cells(reports, run, cells)
    history = read_history(reports)
    add_abi_diffs(reports, history, run, results)
    add_perf(history, run, results)
    mark_gpu_history(history, run, results)
    counts: dict[str, int] = {}
    for c in results:
        c["state"] = cell_state(c)
        c["links"] = cell_links(reports, run, c)
        counts[c["state"]] = counts.get(c["state"], 0) + 1
    times = night_times(results)
    repo = next((c["repo"] for c in results if c.get("repo")), None)
    merged = {"run": run, **times, "repo": repo,
              "hosts": sorted({c["host"] for c in results if c.get("host")}),
              "merged": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
              "fail_on": list(fail_on), "ok": not any(fails_night(c, fail_on) for c in results),
              "counts": counts, "cells": results}
    write_atomic(reports / f"nightly-{run}.json", pretty_json(merged))
    slim = {"run": run, **times, "repo": repo, "hosts": merged["hosts"], "ok": merged["ok"],
            "cells": [{k: v for k, v in c.items() if k not in SLIM_DROP} | _slim_abi(c) for c in results]}
    at = next((i for i, h in enumerate(history) if h.get("run") == run), None)
    if at is None:
        history.append(slim)
    else:
        history[at] = slim
    history = history[-history_len:]
    write_atomic(reports / "history.json", pretty_json(history))
    return merged


def _slim_abi(c: dict[str, Any]) -> dict[str, Any]:
    d = c.get("abi_diff")
    if not d or "regressions" not in d:
        return {}
    return {"abi_diff": {"against": d["against"], "added": d["added"], "removed": d["removed"],
                         "size_delta": d["size_delta"], "regressions": d["regressions"][:20]}}


def console_lines(merged: dict[str, Any]) -> list[str]:
    """One line per cell with its failure reason, then the failure's last lines."""
    out = []
    for c in merged["cells"]:
        state = c.get("state") or cell_state(c)
        line = f"{MARKS[state]} {c['cell']}: {c['status'] if state in ('ok', 'failed', 'skipped') else WORDS[state]}"
        if reason := failure_reason(c):
            line += f" at {reason}" if c["status"] == "failed" else f" ({reason})"
        if c.get("source"):
            line += f" [{c['source']['branch']} @ {c['source']['commit'][:12]}]"
        regs = (c.get("abi_diff") or {}).get("regressions") or []
        if regs:
            line += ("" if state == "abi" else "; ABI regression") + f": {regs[0]}" + \
                (f" (+{len(regs) - 1} more)" if len(regs) > 1 else "")
        if perf := perf_line(c):
            line += f"; {perf}"
        out.append(line)
        if c["status"] == "failed" and c.get("tail"):
            out += [f"    {t}" for t in c["tail"].splitlines()[-8:]]
    return out


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(history: list[dict[str, Any]], merged: dict[str, Any]) -> str:
    """index.md: the latest run with reasons, then every kept run one row per cell."""
    repo = merged.get("repo") or {}
    lines = ["# Nightly builds", "", f"## Run {merged['run']} — "
             f"{'ok' if merged['ok'] else 'FAILED'}", "",
             f"Started {merged.get('started')}, wall time {human_seconds(merged.get('wall_seconds'))}; "
             f"commit {(repo.get('commit') or '?')[:12]} on {repo.get('branch') or '?'}; "
             f"hosts {', '.join(merged.get('hosts') or []) or '?'}.", "",
             "| | cell | state | reason | commit | id | origin | cell wall | built in | size | GLIBC / GLIBCXX | ABI |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in merged["cells"]:
        d = c.get("abi_diff") or {}
        abi = ("REGRESSION: " + _md(d["regressions"][0])) if d.get("regressions") else \
            (f"+{d['added']} −{d['removed']} symbols" if "added" in d else "")
        abi += (" " + _md(perf_line(c))) if perf_line(c) else ""
        g = c.get("glibc") or {}
        state = c.get("state") or cell_state(c)
        lines.append(
            f"| {MARKS[state]} | {c['cell']} | {c['status'] if state in ('ok', 'failed', 'skipped') else WORDS[state]}"
            f"{' (' + c['stage'] + ')' if c.get('stage') else ''} | "
            f"{_md(failure_reason(c))[:300]} | {(c.get('source') or {}).get('commit', '')[:12]} | "
            f"{c.get('id', '')[:12]} | {c.get('origin', '')} | {human_seconds(c.get('seconds'))} | "
            f"{human_seconds(c.get('build_seconds')) or 'not built this night'} | "
            f"{human_size(c.get('size'))} | {g.get('GLIBC', '')} / {g.get('GLIBCXX', '')} | {abi} |")
    lines += ["", "## History", "", "| run | cell | status | reason | id |", "|---|---|---|---|---|"]
    for run in reversed(history):
        for c in run["cells"]:
            lines.append(f"| {run['run']} | {c['cell']} | {c['status']}"
                         f"{' (' + c['stage'] + ')' if c.get('stage') else ''} | "
                         f"{_md(failure_reason(c))[:200]} | {c.get('id', '')[:12]} |")
    return "\n".join(lines) + "\n"


def summary_json(merged: dict[str, Any], reports: Path) -> dict[str, Any]:
    """What notify=URL posts: the verdict and one entry per cell with its reason."""
    return {"run": merged["run"], "ok": merged["ok"], "counts": merged["counts"],
            "report": str(reports / f"nightly-{merged['run']}.json"),
            "html": str(reports / "index.html"),
            "cells": [{"cell": c["cell"], "status": c["status"], "state": c.get("state"), "stage": c.get("stage"),
                       "reason": failure_reason(c), "id": c.get("id"),
                       "commit": (c.get("source") or {}).get("commit"),
                       "abi_regressions": len((c.get("abi_diff") or {}).get("regressions") or [])}
                      for c in merged["cells"]]}
