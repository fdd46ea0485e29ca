"""`[build.pytorch]` of a recipe: the PyTorch build's options (part of the artifact id).

Everything here becomes environment variables of PyTorch's build (the way its setup.py
reads them); `build.env` / `build.defines` of the recipe and variants add free-form ones.
"""
from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ARCH_RE = re.compile(r"^\d+\.\d+(\+PTX)?$")


class PyTorchOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cuda: bool = False
    # TORCH_CUDA_ARCH_LIST, e.g. "8.0;9.0+PTX"; required when cuda is on.
    cuda_arch_list: str | None = None
    distributed: bool = False
    build_test: bool = False
    # USE_SYSTEM_LIBS: link the distribution's cpuinfo, sleef, onnx, pybind11, ... .
    system_libs: bool = False
    # Optional backends turned off (each becomes USE_<NAME>=0), e.g. ["MKLDNN", "FBGEMM"].
    disable: list[str] = []
    # torch.__version__ (TORCH_BUILD_VERSION); default: version.txt (+git<sha> for checkouts).
    version: str | None = Field(default=None, pattern=r"^[0-9][0-9A-Za-z.+_-]*$")
    # Build torch._C (and torch._C_flatbuffer) from torch/csrc/stub*.c in full builds.
    python_extension: bool = True

    @field_validator("disable")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        for name in v:
            if not re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
                raise ValueError(f"disable entry {name!r} must be an upper-case backend name "
                                 "such as MKLDNN (it becomes USE_MKLDNN=0)")
        return sorted(set(v))

    @field_validator("cuda_arch_list")
    @classmethod
    def _arch(cls, v: str | None) -> str | None:
        if v is None:
            return v
        archs = [a for a in re.split(r"[; ]+", v.strip()) if a]
        bad = [a for a in archs if not ARCH_RE.match(a)]
        if not archs or bad:
            raise ValueError(f"cuda_arch_list {v!r}: use compute capabilities like '8.0;9.0+PTX'")
        return ";".join(archs)

    @model_validator(mode="after")
    def _cuda_needs_arch(self) -> PyTorchOptions:
        if self.cuda and not self.cuda_arch_list:
            raise ValueError("cuda = true needs cuda_arch_list (TORCH_CUDA_ARCH_LIST), e.g. "
                             "'8.0;9.0': PyTorch would otherwise guess from the build machine's GPU")
        return self
