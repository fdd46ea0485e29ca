"""The CUDA check: the images embedded in each fatbin against the variant's architectures."""
from __future__ import annotations

import re

from orchestrator.model.cuda_arch import cmake_architectures
from orchestrator.verify.checks.state import State
from orchestrator.verify.elf import read_elf
from orchestrator.verify.fatbin import fatbin_images
from orchestrator.verify.report import Finding


def expected_cuda_images(spec: str) -> set[str] | None:
    """CMake CUDA_ARCHITECTURES ("80;90-real;90-virtual") as {"sm_80", "compute_80", ...};
    None for values that name no fixed list (all, native)."""
    out: set[str] = set()
    for item in re.split(r"[;,\s]+", spec.strip()):
        if not item:
            continue
        if item in ("all", "all-major", "native", "OFF"):
            return None
        m = re.fullmatch(r"(\d+)[a-z]?(?:-(real|virtual))?", item)
        if not m:
            raise ValueError(f"CUDA architecture {item!r} is not in CMake's form (e.g. 80, 90-real)")
        arch, kind = m.group(1), m.group(2)
        if kind in (None, "real"):
            out.add(f"sm_{arch}")
        if kind in (None, "virtual"):
            out.add(f"compute_{arch}")
    return out


def check_cuda(st: State) -> list[Finding]:
    """The sm_XX/compute_XX images embedded in each fatbin match the variant's arch list."""
    cfg = st.config
    spec = cfg.rules.cuda_architectures.get(cfg.variant)
    if spec is None and "CMAKE_CUDA_ARCHITECTURES" in cfg.defines:
        spec = str(cfg.defines["CMAKE_CUDA_ARCHITECTURES"])
    # A PyTorch build's "9.0+PTX": its fatbins are checked, but a partial (targets=) build
    # may name no kernel at all (c10_cuda has none), so carrying none is no failure.
    from_torch = spec is None and "TORCH_CUDA_ARCH_LIST" in cfg.defines
    if from_torch:
        spec = cmake_architectures(str(cfg.defines["TORCH_CUDA_ARCH_LIST"]))
    expected = expected_cuda_images(spec) if spec else None
    out: list[Finding] = []
    any_fatbin = any(f.cuda for f in st.reused.values())
    # The libraries and executables, then the kept CUDA objects (facts only for the former).
    files = [(rel, obj.path, obj) for rel, obj in st.objects.items()]
    for path in cfg.cuda_objects:
        files.append((st.rel(path), path, read_elf(path, symbols=False)))
    for rel, path, obj in files:
        images = fatbin_images(path, obj)
        if not images:
            continue
        any_fatbin = True
        got = {str(i) for i in images}
        if rel in st.facts:
            st.facts[rel].cuda = sorted(got)
        if expected is None:
            continue
        extra, lacking = sorted(got - expected), sorted(expected - got)
        if extra or lacking:
            parts = []
            if lacking:
                parts.append(f"lacks {', '.join(lacking)}")
            if extra:
                parts.append(f"has unexpected {', '.join(extra)}")
            out.append(Finding(check="cuda", severity="fail", file=rel,
                               cause=f"fatbin embeds {', '.join(sorted(got))} but variant {cfg.variant} "
                                     f"asks for CUDA architectures {spec!r}: {'; '.join(parts)}",
                               detail={"embedded": sorted(got), "expected": sorted(expected)}))
    if expected and not any_fatbin and not from_torch:
        out.append(Finding(check="cuda", severity="fail", file="prefix",
                           cause=f"variant {cfg.variant} asks for CUDA architectures {spec!r} but no "
                                 "file carries a .nv_fatbin section"))
    return out
