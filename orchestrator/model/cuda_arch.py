"""PyTorch's TORCH_CUDA_ARCH_LIST in CMake's CUDA_ARCHITECTURES form: what the plan's nvcc check
and verify's fatbin check compare (no pydantic: verify's engine imports it)."""
from __future__ import annotations

import re


def cmake_architectures(arch_list: str) -> str:
    """TORCH_CUDA_ARCH_LIST ("8.0;9.0+PTX") in CMake's CUDA_ARCHITECTURES form ("80-real;90"):
    X.Y is the sm_XY cubin, +PTX adds the compute_XY PTX (what torch's gencode flags ask nvcc
    for). Named architectures (Hopper, ...) and malformed entries are kept as given."""
    out = []
    for item in (a for a in re.split(r"[;, ]+", arch_list.strip()) if a):
        m = re.fullmatch(r"(\d+)\.(\d+)([af]?)(\+PTX)?", item)
        out.append(item if m is None else f"{m[1]}{m[2]}{m[3]}" + ("" if m[4] else "-real"))
    return ";".join(out)
