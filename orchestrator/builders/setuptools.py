"""setup.py projects (plain C extensions, torch.utils.cpp_extension) with the locked setuptools.

Built as a PEP 517 wheel by the setuptools backend (see wheel.py: source copy, no isolation,
no index), then unpacked into the prefix. The compile line is ours: setuptools takes CFLAGS /
CXXFLAGS from the environment *instead of* the interpreter's recorded flags (Debian's
`-g -O2 ...`), so the variant decides -O and -g; cpp_extension reads the same line and runs
ninja (the toolchain's) with MAX_JOBS = jobs. CC / CXX are the compile cache's wrappers
(compile_cache/wrappers.py), so every compile goes through the build's launcher, and the
source copy persists with setuptools' build/ in it (wheel.copy_source): cpp_extension's
ninja recompiles only what changed; plain distutils recompiles an extension's sources, which
the cache answers.
"""
from __future__ import annotations

from orchestrator.builders.compile_cache.wrappers import compiler_wrappers
from orchestrator.builders.context import BuildContext
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

# CMake's meaning of each build type, on setuptools' compile lines.
BUILD_TYPE_FLAGS = {
    "RelWithDebInfo": ["-O2", "-g", "-DNDEBUG"],
    "Release": ["-O3", "-DNDEBUG"],
    "Debug": ["-O0", "-g"],
    "MinSizeRel": ["-Os", "-DNDEBUG"],
}
# What CPython's own CFLAGS carry that extensions expect, without its -g/-O.
BASE_FLAGS = ["-fwrapv", "-Wall"]


def compile_flags(ctx: BuildContext, built: BuildContext) -> list[str]:
    """Base + build type + recipe defines (as -D) + recipe cflags + prefix maps, in that order."""
    var = ctx.plan.variant
    defines = [f"-D{k}" if v is True else f"-D{k}={int(v) if isinstance(v, bool) else v}"
               for k, v in sorted(var.defines.items())]
    return [*BASE_FLAGS, *BUILD_TYPE_FLAGS[var.build_type], *defines, *var.cflags,
            *copy_prefix_map_flags(ctx, built)]


class SetuptoolsBuilder:
    """setup.py (or pyproject with the setuptools backend) → wheel → prefix/python."""

    def build(self, ctx: BuildContext) -> BuildContext:
        system = read_build_system(ctx, ctx.source_dir)
        if system["build-backend"] not in SETUPTOOLS_BACKENDS:
            raise UserError(f"{where(ctx)}: build.system = \"setuptools\" but the source's "
                            f"build-backend is {system['build-backend']!r}; use build.system = \"pep517\"")
        check_requirements(ctx, list(system["requires"]))
        built = copy_source(ctx)
        tc = ctx.toolchain
        env = {**offline_env(built), **flags_env(compile_flags(ctx, built)),
               **compiler_wrappers(ctx.compile_cache, {"CC": tc.cc, "CXX": tc.cxx}, ctx.build_dir),
               "LDSHARED": f"{tc.cc} -shared", "LDCXXSHARED": f"{tc.cxx} -shared"}
        wheel = build_wheel(built, env, [])
        built.prefix.mkdir(parents=True, exist_ok=True)
        unpack_wheel(wheel, built.prefix)
        ctx.meta.mkdir(parents=True, exist_ok=True)
        for ninja_log in sorted((built.source_dir / "build").glob("temp.*/.ninja_log")):
            (ctx.meta / "ninja_log").write_bytes(ninja_log.read_bytes())
        return ctx
