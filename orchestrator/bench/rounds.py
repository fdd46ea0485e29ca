"""Running the command: each run a fresh process in its side's own environment, pinned to the
same CPU; warm-up runs first (not kept), then rounds in the order A B B A A B B A ... so that a
drift of the machine falls on both sides alike. What a run yields: its wall time, its CPU time
(user + system, from wait4), or a metric read from the last JSON line of its stdout that holds
the key (what pyperf, pytest-benchmark or a torch.utils.benchmark script can print)."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from orchestrator.errors import CheckFailed, UserError

TAIL_LINES = 20


@dataclass
class Measure:
    kind: str  # "wall" | "cpu" | "metric"
    metric: str = ""  # the JSON key, for kind "metric"

    @property
    def unit(self) -> str:
        return "s" if self.kind in ("wall", "cpu") else ""  # a metric's unit is the command's

    def describe(self) -> str:
        return {"wall": "wall time", "cpu": "CPU time (user+sys)"}.get(
            self.kind, f"metric {self.metric!r} (last JSON line)")


@dataclass
class Run:
    label: str
    env: dict[str, str]
    samples: list[float] = field(default_factory=list)


def interleaved(rounds: int) -> list[int]:
    """Side indices in the order A B B A A B B A ... (rounds runs of each)."""
    return [i if r % 2 == 0 else 1 - i for r in range(rounds) for i in (0, 1)]


def bench_cpu() -> int:
    """The CPU both sides run on: the last one this process may use (CPU 0 takes most
    interrupts)."""
    return max(os.sched_getaffinity(0))


@contextlib.contextmanager
def pinned(cpu: int) -> Iterator[None]:
    """This process (and so every child it starts) on `cpu` only, restored afterwards."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def metric_of(stdout: str, key: str) -> float | None:
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            data = json.loads(line)
        except ValueError:
            continue
        value = data.get(key) if isinstance(data, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def run_once(command: list[str], run: Run, measure: Measure) -> float:
    """One run of command in run's environment; its measure. A failure is CheckFailed (exit 1)
    naming the side and the output's tail; a command not found is bad input."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(command, env=run.env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT)
        except OSError as e:
            raise UserError(f"bench: cannot run {command[0]!r} in {run.label}'s environment: "
                            f"{e.strerror}") from None
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    if proc.returncode != 0:
        tail = "\n".join(text.splitlines()[-TAIL_LINES:])
        raise CheckFailed(f"bench: the command failed in {run.label} (exit {proc.returncode}); "
                          f"its output's last lines follow", report=tail or "(no output)")
    if measure.kind == "wall":
        return wall
    if measure.kind == "cpu":
        return usage.ru_utime + usage.ru_stime
    value = metric_of(text, measure.metric)
    if value is None:
        tail = "\n".join(text.splitlines()[-TAIL_LINES:])
        raise CheckFailed(f"bench: {run.label}'s run printed no JSON line with a number at "
                          f"{measure.metric!r}", report=tail or "(no output)")
    return value


def measure_sides(command: list[str], runs: list[Run], measure: Measure, rounds: int,
                  warmup: int, cpu: int) -> list[str]:
    """Fill each run's samples; returns the order the kept runs ran in ("A", "B")."""
    order = []
    with pinned(cpu):
        for _ in range(warmup):
            for run in runs:
                run_once(command, run, measure)
        for i in interleaved(rounds):
            runs[i].samples.append(run_once(command, runs[i], measure))
            order.append("AB"[i])
    return order


def measure_one(command: list[str], run: Run, measure: Measure, rounds: int, warmup: int,
                cpu: int) -> list[float]:
    """One side alone (the nightly bot's per-night samples): warm-up, then rounds runs."""
    with pinned(cpu):
        for _ in range(warmup):
            run_once(command, run, measure)
        run.samples += [run_once(command, run, measure) for _ in range(rounds)]
    return run.samples
