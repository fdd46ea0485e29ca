"""nightly.toml: the build bot's matrix (recipes × variants), smoke tests and reporting."""
from __future__ import annotations

import re
import string
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from orchestrator.model.process_values import ArgStr

SMOKE_FIELDS = ("recipe", "variant", "build_type")
# What can make a night fail: a cell failing at one of these stages, or "abi" (an ABI
# regression against the cell's previous good night). A missing cell result always fails.
FailClass = Literal["source", "build", "verify", "smoke", "bench", "push", "cell", "abi"]
FAIL_ON_DEFAULT: list[FailClass] = ["source", "build", "verify", "smoke", "bench", "push", "cell", "abi"]


class MatrixEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    recipe: str
    variants: list[str] = Field(min_length=1)
    # Shell commands run after `. .orch/env.sh` in a workspace switched to the artifact;
    # {recipe}, {variant} and {build_type} are substituted. Each must exit 0.
    smoke: list[ArgStr] = []
    # Entries that need a GPU are built and verified everywhere; their smoke tests run only
    # where a GPU is visible (nvidia-smi -L) and are reported as skipped, with the reason, elsewhere.
    requires_gpu: bool = False
    timeout_s: float = Field(default=600, gt=0)
    # A partial build (the build's targets=, e.g. ["c10"] for PyTorch's c10 slice); [] = all.
    targets: list[str] = Field(default=[], max_length=100)
    # Branch tracking (git sources only): build the head of this branch at run time instead of
    # the commit pinned in locks/git-sources.json; the report records the commit built.
    track: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")
    # Performance tracking: this command (argv, no shell) runs in the cell's artifact's own
    # environment (doit run's), bench_rounds times after a warm-up, pinned to one CPU; its
    # samples are kept per night and a night slower than the previous one beyond noise is
    # flagged. bench_metric: read this number from its last JSON line (else its wall time).
    bench: list[ArgStr] = []
    bench_metric: str = Field(default="", pattern=r"^[A-Za-z0-9_.-]{0,100}$")
    bench_rounds: int = Field(default=7, ge=2, le=1000)
    # Flag on the interval alone although the machine was busy (a shared CI runner always is).
    bench_allow_noisy: bool = False
    # A night within this many percent of the previous one is no regression (doit bench's
    # min_effect=; 0: the interval alone decides).
    bench_min_effect: float = Field(default=2.0, ge=0, le=50)

    @field_validator("targets")
    @classmethod
    def _targets(cls, targets: list[str]) -> list[str]:
        for t in targets:
            if not re.match(r"^[A-Za-z0-9_.+/-]{1,200}$", t):
                raise ValueError(f"{t[:80]!r}: a build target is letters, digits and _ . + / -")
        return targets

    @field_validator("smoke")
    @classmethod
    def _templates(cls, cmds: list[str]) -> list[str]:
        """Each command must be a str.format template naming only SMOKE_FIELDS ({{ for a brace)."""
        for cmd in cmds:
            try:
                names = [f for _, f, _spec, _conv in string.Formatter().parse(cmd) if f is not None]
            except ValueError as e:
                raise ValueError(f"{cmd[:80]!r}: {e} (write {{{{ and }}}} for literal braces)") from None
            for name in names:
                if name not in SMOKE_FIELDS:
                    raise ValueError(f"{cmd[:80]!r}: unknown placeholder {{{name[:40]}}}; use "
                                     f"{', '.join('{' + f + '}' for f in SMOKE_FIELDS)} "
                                     "(write {{ and }} for literal braces)")
            try:
                cmd.format(**{f: "x" for f in SMOKE_FIELDS})
            except (ValueError, KeyError, IndexError, AttributeError) as e:
                raise ValueError(f"{cmd[:80]!r}: {e}") from None
        return cmds


class Worker(BaseModel):
    """A CI worker (`doit nightly buildbot`): its name and tags (`cpu`, `gpu`)."""
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,49}$")
    tags: list[Literal["cpu", "gpu"]] = Field(min_length=1)


class BuildbotConfig(BaseModel):
    """`doit nightly buildbot`'s master: its workers, ports and the builders' shared settings."""
    model_config = ConfigDict(extra="forbid")
    workers: list[Worker] = Field(min_length=1)
    worker_port: int = Field(default=9989, ge=1, le=65535)
    www_port: int = Field(default=8010, ge=1, le=65535)
    # Listen on this address only ("" = every interface).
    interface: str = Field(default="", pattern=r"^[0-9A-Za-z.:-]{0,100}$")
    # The Nightly scheduler's time (UTC).
    hour: int = Field(default=2, ge=0, le=23)
    minute: int = Field(default=0, ge=0, le=59)
    # Builds at a time on one gpu worker (LLVM's GPU builders: one); cells at a time on a cpu one.
    gpu_max_builds: int = Field(default=1, ge=1)
    cpu_cells_at_a_time: int = Field(default=1, ge=1)


class NightlyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    matrix: list[MatrixEntry] = Field(min_length=1)
    # Push every verified artifact to the cache's push URL (needs ORCH_CACHE_SIGNING_KEY).
    push: bool = False
    # How many runs the history page keeps.
    history: int = Field(default=30, ge=1)
    # Which failures fail the night (exit 1); the others are shown, in their own state.
    fail_on: list[FailClass] = Field(default_factory=lambda: list(FAIL_ON_DEFAULT))
    buildbot: BuildbotConfig | None = None
