"""nightly.toml: the build bot's matrix (recipes × variants), smoke tests and reporting."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class MatrixEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    recipe: str
    variants: list[str] = Field(min_length=1)
    # Shell commands run after `. .orch/env.sh` in a workspace switched to the artifact;
    # {recipe}, {variant} and {build_type} are substituted. Each must exit 0.
    smoke: list[str] = []
    # Entries that need a GPU are skipped (and reported as skipped) where none is visible.
    requires_gpu: bool = False
    timeout_s: float = Field(default=600, gt=0)


class NightlyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    matrix: list[MatrixEntry] = Field(min_length=1)
    # Push every verified artifact to the cache's push URL (needs ORCH_CACHE_SIGNING_KEY).
    push: bool = False
    # How many runs the history page keeps.
    history: int = Field(default=30, ge=1)
