"""Performance over the nights (the nightly bot's `bench = [...]` per matrix cell): a cell's
samples for one night, and the comparison of a night against the previous night that built
the cell with the same command, flagged as a regression when it is slower beyond noise (the
bootstrap interval of the ratio excludes 1, on a quiet machine unless bench_allow_noisy),
naming the commit range (the tracked branch's commits, else the two artifact ids)."""
from __future__ import annotations

import os
from typing import Any

from orchestrator.bench.environment import artifact_env
from orchestrator.bench.noise import read_load
from orchestrator.bench.rounds import Measure, Run, bench_cpu, measure_one
from orchestrator.bench.sides import Side
from orchestrator.bench.stats import MIN_EFFECT, SLOWER, ratio_ci, summarize, verdict
from orchestrator.model.nightly import MatrixEntry


def sample_cell(side: Side, entry: MatrixEntry) -> dict[str, Any]:
    """Run the cell's bench command; its samples and summary (CheckFailed when it fails)."""
    measure = Measure("metric", entry.bench_metric) if entry.bench_metric else Measure("wall")
    run = Run(side.label, artifact_env(side, dict(os.environ)))
    before = read_load()
    samples = measure_one(list(entry.bench), run, measure, entry.bench_rounds, 1, bench_cpu())
    after = read_load()
    s = summarize(samples)
    return {"command": list(entry.bench), "measure": measure.kind, "metric": measure.metric,
            "unit": measure.unit, "samples": samples, "median": s.median, "iqr": s.iqr, "n": s.n,
            "noise": [*before.reasons(), *after.reasons()],
            "allow_noisy": entry.bench_allow_noisy, "min_effect": entry.bench_min_effect / 100}


def previous_bench(history: list[dict[str, Any]], run: str, cell: dict[str, Any]) -> dict[str, Any] | None:
    """The latest earlier night's result of this cell with samples of the same command."""
    for h in reversed(history):
        if h["run"] == run:
            continue
        for c in h["cells"]:
            b = c.get("bench")
            if c.get("cell") == cell["cell"] and b and b.get("command") == cell["bench"]["command"] \
                    and b.get("metric") == cell["bench"]["metric"]:
                return {"run": h["run"], **c}
    return None


def commit_range(old: dict[str, Any], new: dict[str, Any]) -> str:
    a, b = (old.get("source") or {}).get("commit"), (new.get("source") or {}).get("commit")
    if a and b:
        return f"commits {a[:12]}..{b[:12]}"
    return f"artifacts {str(old.get('id', '?'))[:12]}..{str(new.get('id', '?'))[:12]}"


def add_perf(history: list[dict[str, Any]], run: str, results: list[dict[str, Any]]) -> None:
    """Each cell with samples gets `perf`: this night against the previous one."""
    for c in results:
        if not c.get("bench"):
            continue
        prev = previous_bench(history, run, c)
        if prev is None:
            c["perf"] = None
            continue
        old, new = prev["bench"]["samples"], c["bench"]["samples"]
        ci = ratio_ci(old, new)
        judged = verdict(summarize(old), summarize(new), ci, c["bench"]["noise"],
                         c["bench"].get("allow_noisy", False),
                         min_effect=c["bench"].get("min_effect", MIN_EFFECT))
        ratio = summarize(new).median / summarize(old).median
        c["perf"] = {"against": prev["run"], "ratio": ratio, "ci": list(ci),
                     "verdict": judged.word, "why": judged.why, "regression": judged.word == SLOWER,
                     "range": commit_range(prev, c)}


def perf_line(c: dict[str, Any]) -> str:
    """'' or the one line a regression gets in the console and the reports."""
    p = c.get("perf") or {}
    if not p.get("regression"):
        return ""
    return (f"PERF REGRESSION: {p['ratio']:.2f}x the time of run {p['against']} "
            f"(95% CI {p['ci'][0]:.2f}–{p['ci'][1]:.2f}), {p['range']}")
