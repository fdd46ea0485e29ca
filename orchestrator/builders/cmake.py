"""build.system = "cmake": CMake + Ninja from the toolchain, configured once per build tree
(the source reached through the path-free link), built, installed, meta/ kept."""
from __future__ import annotations

from orchestrator.builders.cmake_steps import collect_meta, compile_, configure, install
from orchestrator.builders.context import BuildContext

# CMake's install rewrites a build-tree RPATH in place, leaving .dynstr sized by the build
# tree's path: linking with the install RPATH keeps a build at another path byte-identical
# (check=1). The recipe's own defines still win.
REPRODUCIBLE_DEFINES = {"CMAKE_BUILD_WITH_INSTALL_RPATH": "ON"}


class CMakeBuilder:
    def build(self, ctx: BuildContext) -> None:
        configure(ctx, overrides=REPRODUCIBLE_DEFINES, linked_source=True)
        compile_(ctx, may_head_start=True)
        ctx.prefix.mkdir(parents=True, exist_ok=True)
        if not ctx.plan.variant.targets:
            install(ctx)
        collect_meta(ctx)

