"""`doit bench format=json`: the comparison of two artifacts (one JSON line, this shape)."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BenchSide(_Strict):
    label: str  # the variant, or the id as given
    id: str
    name: str  # <id>-<recipe>-<variant>
    path: str
    samples: list[float]  # in the order they ran
    median: float
    q1: float
    q3: float
    iqr: float
    n: int
    # The shared objects inside store entries that the command's processes loaded (real paths,
    # from the loader's trace of its first warm-up run): its own entry's only, or bench failed.
    libraries: list[str] = []


class LoadReading(_Strict):
    load1: float
    cores: int
    cpu: float  # PSI some avg10, %
    io: float
    memory: float


class Noise(_Strict):
    before: LoadReading
    after: LoadReading
    reasons: list[str]  # why the machine was too busy (empty: quiet)
    allowed: bool  # allow_noisy=1: a verdict despite the reasons


class Difference(_Strict):
    """plan_why.Change: a dotted path of the derivation, added (+), removed (-), changed (~)."""
    path: str
    op: Literal["+", "-", "~"]
    old: object = None
    new: object = None


class BenchReport(_Strict):
    schema_version: Literal[1] = 1
    command: list[str]
    measure: str  # "wall" | "cpu" | "metric"
    metric: str  # the JSON key for measure "metric", else ""
    unit: str  # "s" for wall and cpu; "" for a metric (the command's own unit)
    better: Literal["lower", "higher"]
    cpu: int  # the CPU every run was pinned to
    rounds: int
    warmup: int
    order: list[Literal["A", "B"]]  # the sides in the order the kept runs ran (A B B A ...)
    a: BenchSide
    b: BenchSide
    ratio: float  # median(b) / median(a)
    ci: tuple[float, float]  # its bootstrap interval
    confidence: float
    min_effect: float = 0.02  # a ratio within this fraction of 1 is no difference (min_effect=)
    verdict: Literal["faster", "slower", "no difference within noise", "no verdict"]  # b vs a
    why: str
    noise: Noise
    differences: list[Difference]  # the derivations' differences (doit why)
    plot: str | None
