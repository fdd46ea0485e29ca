"""`doit bench variants=a,b [recipe=] -- CMD ...` (or ids=A,B): CMD timed in each artifact's
own environment, interleaved on one CPU, with medians, IQRs, the ratio's bootstrap interval and
a verdict (orchestrator.bench). Output: the table, format=json (model.bench.BenchReport), and
an SVG plot (plot=PATH; default .orch/bench/<a>-vs-<b>.svg in the workspace)."""
from __future__ import annotations

import re
from pathlib import Path

from orchestrator.bench.compare import compare
from orchestrator.bench.render import summary_lines, table, write_plot
from orchestrator.bench.rounds import Measure
from orchestrator.bench.sides import bench_sides
from orchestrator.bench.stats import MIN_EFFECT
from orchestrator.config.command_line import command_after_dashes
from orchestrator.config.settings import Settings
from orchestrator.console import console
from orchestrator.errors import UserError
from orchestrator.store.artifacts import Store
from orchestrator.verbs.output import print_json

DEFAULT_ROUNDS = 10
DEFAULT_WARMUP = 1


def count_var(settings: Settings, name: str, default: int, least: int) -> int:
    raw = settings.vars.get(name, str(default))
    if not raw.strip().isdigit() or int(raw) < least or int(raw) > 10_000:
        raise UserError(f"bench: {name}={raw!r} is not a count from {least} to 10000; "
                        f"e.g. {name}={default}")
    return int(raw)


def min_effect_of(settings: Settings) -> float:
    """min_effect=P (percent, 0 to 50) as a fraction."""
    raw = settings.vars.get("min_effect", str(MIN_EFFECT * 100)).strip().removesuffix("%")
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 50:
        raise UserError(f"bench: min_effect={settings.vars.get('min_effect')!r} is not a percentage "
                        "from 0 to 50; e.g. min_effect=2 (a ratio within 2% of 1 is no difference)")
    return value / 100


def measure_of(settings: Settings) -> Measure:
    metric = settings.vars.get("metric", "").strip()
    kind = settings.vars.get("measure", "metric" if metric else "wall").strip()
    if kind not in ("wall", "cpu", "metric"):
        raise UserError(f"bench: measure={kind!r}: use measure=wall, measure=cpu or "
                        "metric=KEY (a number in the last JSON line the command prints)")
    if (kind == "metric") != bool(metric):
        raise UserError("bench: metric=KEY names the number to read (measure=metric); "
                        "measure=wall or cpu takes no metric=")
    return Measure(kind, metric)


def command_of(words: list[str]) -> list[str]:
    command = command_after_dashes(words)
    if not command:
        raise UserError("bench: give the command after --, e.g. doit bench "
                        "variants=relwithdebinfo,release -- python -c 'import demo'")
    return command


def plot_path(settings: Settings, a: str, b: str) -> Path:
    if "plot" in settings.vars:
        return Path(settings.vars["plot"]).expanduser().absolute()
    tidy = lambda label: re.sub(r"[^A-Za-z0-9_.-]", "_", label)[:40]  # noqa: E731
    return settings.workspace / ".orch" / "bench" / f"{tidy(a)}-vs-{tidy(b)}.svg"


def cmd_bench(settings: Settings, words: list[str]) -> None:
    command = command_of(words)
    measure = measure_of(settings)
    rounds = count_var(settings, "rounds", DEFAULT_ROUNDS, 2)
    warmup = count_var(settings, "warmup", DEFAULT_WARMUP, 0)
    better = settings.vars.get("better", "lower")
    if better not in ("lower", "higher"):
        raise UserError(f"bench: better={better!r}: use better=lower (times) or better=higher")
    allow_noisy = settings.flag("allow_noisy")
    min_effect = min_effect_of(settings)
    store = Store(settings.store_root)
    sides = bench_sides(settings, store)
    report = compare(sides, command, measure, rounds, warmup, better, allow_noisy, min_effect)
    path = plot_path(settings, sides[0].label, sides[1].label)
    write_plot(report, path)
    report = report.model_copy(update={"plot": str(path)})
    if settings.fmt == "json":
        print_json(report.model_dump(mode="json"))
        return
    console.print(table(report))
    for line in summary_lines(report):
        console.print(line, markup=False, soft_wrap=True)
