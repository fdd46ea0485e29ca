"""CMakePresets.json in the recipe's source directory: one configure and one build preset per
variant, with the builder's own arguments (less the -D variables the project never reads)."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from orchestrator.ide.jsonc import OURS, read_json
from orchestrator.ide.spec import IdeSpec, presets_binary_dir_for


def presets_binary_dir(spec: IdeSpec, variant: str) -> Path:
    return presets_binary_dir_for(spec.workspace, spec.recipe, variant)


def _cache_variables(args: list[str]) -> tuple[str | None, dict[str, str]]:
    gen, cache = None, {}
    it = iter(args)
    for a in it:
        if a == "-G":
            gen = next(it, None)
        elif a.startswith("-D") and "=" in a:
            k, v = a[2:].split("=", 1)
            cache[k.split(":", 1)[0]] = v
    return gen, cache


_LANG_VAR = re.compile(r"^CMAKE_(C|CXX|CUDA|HIP|Fortran|ASM|OBJC|OBJCXX|Swift|ISPC)_")


def project_cmake_text(source_dir: Path, limit: int = 4_000_000) -> str:
    """The project's CMake code (CMakeLists.txt and *.cmake, up to limit bytes): what
    decides which -D variables it reads."""
    parts: list[str] = []
    size = 0
    for dirpath, dirnames, filenames in os.walk(source_dir):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "build")
        for n in sorted(filenames):
            if n == "CMakeLists.txt" or n.endswith(".cmake"):
                try:
                    text = (Path(dirpath) / n).read_text(errors="replace")
                except OSError:
                    continue
                parts.append(text)
                size += len(text)
                if size > limit:
                    return "\n".join(parts)
    return "\n".join(parts)


def used_cache_variables(cache: dict[str, str], cmake_text: str) -> dict[str, str]:
    """Drop the builder's -D variables this project never reads, which CMake would report
    as "Manually-specified variables were not used": a language's CMAKE_<LANG>_* when the
    project never enables that language (C and CXX are the default ones), and a package's
    <Pkg>_* when the project never names the package (Python_EXECUTABLE without
    find_package(Python))."""
    text = re.sub(r"#[^\n]*", "", cmake_text)  # comments name no variable
    out: dict[str, str] = {}
    for k, v in cache.items():
        m = _LANG_VAR.match(k)
        if m:
            lang = re.compile(rf"\b(project|enable_language)\s*\([^)]*\b{m[1]}\b", re.I)
            if m[1] in ("C", "CXX") or lang.search(text):
                out[k] = v
        elif k.startswith("CMAKE_") or re.search(rf"\b{re.escape(k)}\b", text):
            out[k] = v
        elif "_" in k and re.search(rf"find_package\s*\(\s*{re.escape(k.split('_', 1)[0])}\b",
                                    text, re.I):
            out[k] = v
    return out


def cmake_presets(spec: IdeSpec, path: Path) -> dict[str, Any]:
    """One configure and one build preset per variant, with the builder's own arguments."""
    old = read_json(path)
    configure, build = [], []
    cmake_text = project_cmake_text(spec.source_dir)
    for v in spec.variants:
        gen, cache = _cache_variables(list(spec.configure_args.get(v, [])))
        cache.pop("CMAKE_INSTALL_PREFIX", None)
        cache = used_cache_variables(cache, cmake_text)
        configure.append({"name": f"orch-{v}", "displayName": f"{OURS}{spec.recipe} {v}",
                          "generator": gen or "Ninja",
                          "binaryDir": str(presets_binary_dir(spec, v)),
                          "cmakeExecutable": str(spec.cmake), "cacheVariables": cache})
        build.append({"name": f"orch-{v}", "displayName": f"{OURS}{spec.recipe} {v}",
                      "configurePreset": f"orch-{v}"})

    def merged(key: str, ours: list[dict[str, Any]]) -> list[Any]:
        kept = [p for p in old.get(key, []) if not str(p.get("name", "")).startswith("orch-")]
        return [*kept, *ours]
    return {**old, "version": max(3, int(old.get("version", 3))),
            "cmakeMinimumRequired": old.get("cmakeMinimumRequired",
                                            {"major": 3, "minor": 21, "patch": 0}),
            "configurePresets": merged("configurePresets", configure),
            "buildPresets": merged("buildPresets", build)}


def presets_path(spec: IdeSpec) -> Path:
    """CMake (and CMake Tools) read presets from the CMake source directory only."""
    return spec.source_dir / "CMakePresets.json"
