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
from orchestrator.fs import write_atomic
from orchestrator.hashing import pretty_json

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


def merge(reports: Path, run: str, cells: list[Cell], history_len: int) -> dict[str, Any]:
    """Write nightly-<run>.json and history.json; return the merged run."""
    results = read_cells(reports, run, cells)
    history = read_history(reports)
    add_abi_diffs(reports, history, run, results)
    add_perf(history, run, results)
    counts: dict[str, int] = {}
    for c in results:
        counts[c["status"]] = counts.get(c["status"], 0) + 1
    started = min((c["started"] for c in results if c.get("started")), default=None)
    merged = {"run": run, "started": started,
              "merged": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "ok": all(c["status"] in ("ok", "skipped") for c in results),
              "counts": counts, "cells": results}
    write_atomic(reports / f"nightly-{run}.json", pretty_json(merged))
    slim = {"run": run, "started": started, "ok": merged["ok"],
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
        line = f"{c['cell']}: {c['status']}"
        if reason := failure_reason(c):
            line += f" at {reason}" if c["status"] == "failed" else f" ({reason})"
        if c.get("source"):
            line += f" [{c['source']['branch']} @ {c['source']['commit'][:12]}]"
        regs = (c.get("abi_diff") or {}).get("regressions") or []
        if regs:
            line += f"; ABI regression: {regs[0]}" + (f" (+{len(regs) - 1} more)" if len(regs) > 1 else "")
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
    lines = ["# Nightly builds", "", f"## Run {merged['run']} — "
             f"{'ok' if merged['ok'] else 'FAILED'}", "",
             "| cell | status | reason | commit | id | origin | build s | size | GLIBC / GLIBCXX | ABI |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for c in merged["cells"]:
        d = c.get("abi_diff") or {}
        abi = ("REGRESSION: " + _md(d["regressions"][0])) if d.get("regressions") else \
            (f"+{d['added']} −{d['removed']} symbols" if "added" in d else "")
        abi += (" " + _md(perf_line(c))) if perf_line(c) else ""
        g = c.get("glibc") or {}
        lines.append(
            f"| {c['cell']} | {c['status']}{' (' + c['stage'] + ')' if c.get('stage') else ''} | "
            f"{_md(failure_reason(c))[:300]} | {(c.get('source') or {}).get('commit', '')[:12]} | "
            f"{c.get('id', '')[:12]} | {c.get('origin', '')} | {c.get('build_seconds') or ''} | "
            f"{c.get('size', '')} | {g.get('GLIBC', '')} / {g.get('GLIBCXX', '')} | {abi} |")
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
            "cells": [{"cell": c["cell"], "status": c["status"], "stage": c.get("stage"),
                       "reason": failure_reason(c), "id": c.get("id"),
                       "commit": (c.get("source") or {}).get("commit"),
                       "abi_regressions": len((c.get("abi_diff") or {}).get("regressions") or [])}
                      for c in merged["cells"]]}
