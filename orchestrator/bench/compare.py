"""`doit bench`'s work: two artifacts, each in its own environment, measured in interleaved
rounds on one CPU, summarized (stats), judged (a verdict only on a quiet machine and steady
runs) and explained (the derivations' differences, doit why's diff). The first warm-up run of each
side (or one run more, with warmup=0) is traced for the store libraries it loads (loaded.py)."""
from __future__ import annotations

import os
from dataclasses import asdict

from orchestrator.bench.environment import artifact_env
from orchestrator.bench.loaded import store_libraries
from orchestrator.bench.noise import read_load
from orchestrator.bench.rounds import Measure, Run, bench_cpu, measure_sides, pinned
from orchestrator.bench.sides import Side
from orchestrator.bench.stats import CONFIDENCE, MIN_EFFECT, ratio_ci, summarize, unsteady, verdict
from orchestrator.model.bench import BenchReport, BenchSide, Difference, LoadReading, Noise
from orchestrator.realise.explain import derivation_diff


def side_result(side: Side, samples: list[float], libraries: list[str]) -> BenchSide:
    s = summarize(samples)
    return BenchSide(label=side.label, id=side.artifact_id, name=side.name, path=str(side.path),
                     samples=samples, median=s.median, q1=s.q1, q3=s.q3, iqr=s.iqr, n=s.n,
                     libraries=libraries)


def compare(sides: list[Side], command: list[str], measure: Measure, rounds: int, warmup: int,
            better: str, allow_noisy: bool, min_effect: float = MIN_EFFECT) -> BenchReport:
    runs = [Run(s.label, artifact_env(s, dict(os.environ))) for s in sides]
    cpu = bench_cpu()
    with pinned(cpu):  # the first warm-up run of each side, traced
        libraries = [store_libraries(command, r, measure, s.path) for s, r in zip(sides, runs, strict=True)]
    before = read_load()
    order = measure_sides(command, runs, measure, rounds, max(warmup - 1, 0), cpu)
    after = read_load()
    reasons = [*(f"before: {r}" for r in before.reasons()), *(f"after: {r}" for r in after.reasons())]
    a, b = (summarize(r.samples) for r in runs)
    ratio = b.median / a.median if a.median > 0 else float("inf")
    ci = ratio_ci(runs[0].samples, runs[1].samples)
    judged = verdict(a, b, ci, reasons, allow_noisy, lower_is_better=better == "lower",
                     min_effect=min_effect)
    reasons += unsteady(a, b)
    return BenchReport(
        command=command, measure=measure.kind, metric=measure.metric, unit=measure.unit,
        better=better, cpu=cpu, rounds=rounds, warmup=warmup, order=order,
        a=side_result(sides[0], runs[0].samples, libraries[0]),
        b=side_result(sides[1], runs[1].samples, libraries[1]),
        ratio=ratio, ci=ci, confidence=CONFIDENCE, min_effect=min_effect, verdict=judged.word, why=judged.why,
        noise=Noise(before=LoadReading(**asdict(before)), after=LoadReading(**asdict(after)),
                    reasons=reasons, allowed=allow_noisy),
        differences=[Difference(**asdict(c)) for c in
                     derivation_diff(sides[0].derivation, sides[1].derivation)],
        plot=None)
