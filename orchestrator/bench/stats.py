"""The numbers of a comparison: per side the median, quartiles and n; per pair the ratio of
medians (B over A) with a percentile-bootstrap confidence interval; and the verdict, which
calls a difference only when the interval excludes 1, the ratio is at least the smallest
effect worth a word, the runs themselves are steady and the machine was quiet. Pure
functions of the samples (the bootstrap's generator is seeded)."""
from __future__ import annotations

import random
import statistics
from dataclasses import dataclass

BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95
# A side whose IQR is more than this share of its median is too unsteady for a verdict.
MAX_RELATIVE_IQR = 0.25
# A ratio nearer 1 than this is no difference, whatever its interval: code layout, link order
# and the environment's size alone move timings by a few percent (Mytkowicz et al., "Producing
# wrong data without doing anything obviously wrong!"), and a 95% interval misses 1 in one
# comparison of twenty of the same artifact. min_effect= sets it (0: the interval alone).
MIN_EFFECT = 0.02

FASTER = "faster"
SLOWER = "slower"
SAME = "no difference within noise"
REFUSED = "no verdict"


@dataclass(frozen=True)
class Summary:
    median: float
    q1: float
    q3: float
    n: int

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def relative_iqr(self) -> float:
        return self.iqr / self.median if self.median > 0 else float("inf")


def summarize(samples: list[float]) -> Summary:
    if len(samples) < 2:
        return Summary(samples[0], samples[0], samples[0], len(samples))
    q1, med, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return Summary(med, q1, q3, len(samples))


def ratio_ci(a: list[float], b: list[float], seed: int = 0,
             resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float]:
    """The CONFIDENCE interval of median(b) / median(a) by percentile bootstrap."""
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        ma = statistics.median(rng.choices(a, k=len(a)))
        mb = statistics.median(rng.choices(b, k=len(b)))
        ratios.append(mb / ma if ma > 0 else float("inf"))
    ratios.sort()
    tail = (1 - CONFIDENCE) / 2
    lo = ratios[int(tail * (resamples - 1))]
    hi = ratios[int((1 - tail) * (resamples - 1) + 0.5)]
    return lo, hi


@dataclass(frozen=True)
class Verdict:
    word: str  # FASTER | SLOWER | SAME | REFUSED (B against A)
    why: str


def unsteady(a: Summary, b: Summary) -> list[str]:
    """Sides whose runs spread too widely for a verdict."""
    return [f"{side}'s IQR is {s.relative_iqr:.0%} of its median (runs unsteady; limit "
            f"{MAX_RELATIVE_IQR:.0%})" for side, s in (("A", a), ("B", b))
            if s.relative_iqr > MAX_RELATIVE_IQR]


def verdict(a: Summary, b: Summary, ci: tuple[float, float], noise: list[str],
            allowed: bool = False, lower_is_better: bool = True,
            min_effect: float = MIN_EFFECT) -> Verdict:
    """B against A. `noise`: why the machine was too busy; with the runs' own unsteadiness
    they refuse a verdict unless `allowed` (then the verdict stands on the interval alone)."""
    reasons = [*noise, *unsteady(a, b)]
    if reasons and not allowed:
        return Verdict(REFUSED, "; ".join(reasons))
    lo, hi = ci
    if lo <= 1.0 <= hi:
        return Verdict(SAME, f"the {CONFIDENCE:.0%} interval of the ratio holds 1")
    ratio = b.median / a.median if a.median > 0 else float("inf")
    if abs(ratio - 1.0) < min_effect:
        return Verdict(SAME, f"the ratio is within {min_effect:.0%} of 1 (min_effect; the "
                       f"{CONFIDENCE:.0%} interval excludes 1, but a difference this small is "
                       "what layout and environment alone make)")
    b_larger = lo > 1.0
    word = SLOWER if b_larger == lower_is_better else FASTER
    return Verdict(word, f"the {CONFIDENCE:.0%} interval of the ratio excludes 1")
