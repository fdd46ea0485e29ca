"""What a PyTorch build keeps in meta/ beside the prefix: generated sources for the
debugger, the merged compile_commands.json, the facts pytorch.json reports, and where a
checkout expects the outputs (workspace-links.json)."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from orchestrator.builders.context import BuildContext

# Generated sources a debugger needs to step through (relative to build dir / source dir).
# Every .cpp/.h ATen's codegen writes (the build tree has no sources of its own): Register*,
# Operators*, Functions.cpp, the ufunc kernels (UfuncCPUKernel_add.cpp: where torch.add's CPU
# kernel stops). Not the per-CPU-capability wrappers (`X.cpp.AVX2.cpp`: one #include of X by
# its absolute build-tree path; the line tables name X itself).
GENERATED_IN_BUILD = ("aten/src/ATen/*.cpp", "aten/src/ATen/core/*.cpp", "aten/src/ATen/core/*.h",
                      "aten/src/ATen/*.h", "c10/macros/cmake_macros.h")
CAPABILITY_WRAPPER = re.compile(r"\.cpp\.[A-Z0-9_]+\.cpp$")
GENERATED_IN_SOURCE = ("torch/csrc/autograd/generated/*", "torch/csrc/lazy/generated/*")


def collect_generated(ctx: BuildContext) -> list[str]:
    """Generated sources a debugger steps through, kept in meta/ at their logical path less
    `/orch/` (meta/build/pytorch-<variant>/aten/src/ATen/RegisterCPU.cpp, ...), so one source
    map per logical root (`/orch/build` -> meta/build, `/orch/src` -> meta/src) finds them in
    any copy of the artifact."""
    kept = []
    for root, logical, patterns in ((ctx.build_dir, ctx.logical_build, GENERATED_IN_BUILD),
                                    (ctx.source_dir, ctx.logical_source, GENERATED_IN_SOURCE)):
        for pat in patterns:
            for f in sorted(root.glob(pat)):
                if not f.is_file() or CAPABILITY_WRAPPER.search(f.name):
                    continue
                rel = f"{logical.removeprefix('/orch/')}/{f.relative_to(root).as_posix()}"
                ctx.keep_copy(f, f"meta/{rel}")
                kept.append(rel)
    return kept


def cache_value(cache: Path, key: str) -> str | None:
    if not cache.is_file():
        return None
    for line in cache.read_text(errors="replace").splitlines():
        name, _, rest = line.partition(":")
        if name == key and "=" in rest:
            return rest.split("=", 1)[1]
    return None


def cxx11_abi(ctx: BuildContext, defines: dict[str, str], env: dict[str, str]) -> str:
    """What torch._C._GLIBCXX_USE_CXX11_ABI will say: the define if given, else the compiler's."""
    if "GLIBCXX_USE_CXX11_ABI" in defines:
        return defines["GLIBCXX_USE_CXX11_ABI"]
    res = subprocess.run([str(ctx.toolchain.cxx), "-x", "c++", "-E", "-dM", "-"],
                         input="#include <string>\n", capture_output=True, text=True, env=env)
    m = re.search(r"^#define _GLIBCXX_USE_CXX11_ABI (\d)", res.stdout, re.M)
    return m[1] if m else "unknown"


def link_compile_commands_into_meta(ctx: BuildContext) -> None:
    """setup.py merges build/*compile_commands.json into one file; we keep the merged one
    (CMake's own, which collect_meta copied, when it is the only one)."""
    files = sorted(ctx.build_dir.glob("*compile_commands.json"))
    if [f.name for f in files] == ["compile_commands.json"] \
            and (ctx.meta / "compile_commands.json").is_file():
        return
    entries: list[Any] = []
    for f in files:
        entries += json.loads(f.read_text())
    if entries:
        ctx.copies.pop("meta/compile_commands.json", None)  # merged: not a copy
        merged = ctx.meta / "compile_commands.json"
        merged.unlink(missing_ok=True)  # a kept copy may be a committed inode: never written
        merged.write_text(json.dumps(entries, indent=1))


def checkout_links(ctx: BuildContext) -> dict[str, str]:
    """Where a PyTorch checkout expects the build's outputs (as `setup.py develop` leaves them)."""
    links: dict[str, str] = {}
    lib = ctx.prefix / "lib"
    if lib.is_dir():
        for f in sorted(lib.iterdir()):
            if f.is_file() or f.is_symlink():
                links[f"torch/lib/{f.name}"] = f"prefix/lib/{f.name}"
    for d in ("include", "share", "bin"):  # bin: torch_shm_manager, where setup.py puts it
        if (ctx.prefix / d).is_dir():
            links[f"torch/{d}"] = f"prefix/{d}"
    ext_dir = ctx.prefix / "python" / "torch"
    if ext_dir.is_dir():
        for f in sorted(ext_dir.glob("_C*.so")):
            links[f"torch/{f.name}"] = f"prefix/python/torch/{f.name}"
    for f in sorted((ctx.prefix / "python" / "functorch").glob("_C*.so")):
        links[f"functorch/{f.name}"] = f"prefix/python/functorch/{f.name}"
    return links
