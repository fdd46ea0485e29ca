"""build.system = "pep517": pyproject.toml with a known backend (scikit-build-core, or
setuptools: then the setuptools builder), built as a wheel (see wheel.py) into the prefix."""
from __future__ import annotations

import shutil
from pathlib import Path

from orchestrator.builders import source_mtimes
from orchestrator.builders.cmake_steps import define_value
from orchestrator.builders.context import BuildContext
from orchestrator.builders.setuptools import SetuptoolsBuilder
from orchestrator.builders.wheel import (
    SETUPTOOLS_BACKENDS,
    build_wheel,
    check_requirements,
    copy_prefix_map_flags,
    copy_source,
    flags_env,
    offline_env,
    read_build_system,
    unpack_wheel,
    where,
)
from orchestrator.errors import UserError

SCIKIT_BUILD_CORE = "scikit_build_core.build"
KNOWN_BACKENDS = (SCIKIT_BUILD_CORE, *SETUPTOOLS_BACKENDS)


def keep_meta(ctx: BuildContext, tree: Path) -> None:
    """CMakeCache.txt / compile_commands.json / .ninja_log of a CMake-based backend's tree."""
    ctx.meta.mkdir(parents=True, exist_ok=True)
    for name, dest in (("CMakeCache.txt", "CMakeCache.txt"),
                       ("compile_commands.json", "compile_commands.json"), (".ninja_log", "ninja_log")):
        if (tree / name).is_file():
            shutil.copy2(tree / name, ctx.meta / dest)


def scikit_build_config(ctx: BuildContext) -> list[str]:
    """Variant → scikit-build-core settings: build type, defines, our ninja, a kept build dir."""
    var = ctx.plan.variant
    defines = {"CMAKE_EXPORT_COMPILE_COMMANDS": "ON", "CMAKE_MAKE_PROGRAM": str(ctx.toolchain.ninja),
               "CMAKE_C_COMPILER": str(ctx.toolchain.cc), "CMAKE_CXX_COMPILER": str(ctx.toolchain.cxx),
               **ctx.compile_cache.cmake_defines(),  # the build's launcher, as for cmake
               **{k: define_value(v) for k, v in var.defines.items()}}
    return [f"cmake.build-type={var.build_type}", f"build-dir={ctx.build_dir / 'cmake'}",
            "build.verbose=true", "install.strip=false", "ninja.make-fallback=false",
            *(f"cmake.define.{k}={v}" for k, v in sorted(defines.items()))]


class Pep517Builder:
    """pyproject.toml with a known backend → wheel → prefix."""

    def build(self, ctx: BuildContext) -> BuildContext:
        system = read_build_system(ctx, ctx.source_dir)
        backend = system["build-backend"]
        if backend not in KNOWN_BACKENDS:
            raise UserError(f"{where(ctx)}: build.system = \"pep517\" but the source's build-backend "
                            f"{backend!r} is not supported (known: {', '.join(KNOWN_BACKENDS)}); "
                            "use build.system = \"cmake\" or \"setuptools\"")
        if backend in SETUPTOOLS_BACKENDS:
            return SetuptoolsBuilder().build(ctx)
        check_requirements(ctx, list(system["requires"]))
        built = copy_source(ctx)  # a fresh copy, mtimes kept: the cmake tree persists
        tree = built.build_dir / "cmake"
        if (tree / "build.ninja").is_file():
            source_mtimes.agree(built.source_dir, tree)
        flags = [*ctx.plan.variant.cflags, *copy_prefix_map_flags(ctx, built)]
        env = {**offline_env(built), **flags_env(flags)}
        wheel = build_wheel(built, env, scikit_build_config(built))
        source_mtimes.record(built.source_dir, tree)
        built.prefix.mkdir(parents=True, exist_ok=True)
        unpack_wheel(wheel, built.prefix)
        keep_meta(built, built.build_dir / "cmake")
        return ctx
