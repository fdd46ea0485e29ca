"""Timing shared by the benchmark scripts: medians, since these machines are noisy."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_time(fn: Callable[[], object], rounds: int) -> float:
    """Median wall time of fn() over `rounds` calls."""
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)
