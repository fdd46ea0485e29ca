"""The linker GCC runs for a cmake or pytorch build: the system's GNU ld (the default), or
the lock's mold (`[build] linker = "mold"`, with `deb:mold` in build.uses), unpacked from
its Debian package like ccache and reached through gcc's `-B` (`usr/libexec/mold/ld` is a
link to mold), so no root and no ld on PATH is touched.

mold links what GNU ld links, several times faster (libtorch_cpu.so of PyTorch 2.6's
Release tree: 0.85 s against 2.7-3.7 s); a linked file's bytes differ from GNU ld's, so the
choice is part of the artifact id (the recipe's build section and the deb's digest)."""
from __future__ import annotations

from orchestrator.builders.context import BuildContext
from orchestrator.errors import UserError

LINKER_DEFINES = ("CMAKE_EXE_LINKER_FLAGS", "CMAKE_SHARED_LINKER_FLAGS",
                  "CMAKE_MODULE_LINKER_FLAGS")


def linker_flags(ctx: BuildContext) -> list[str]:
    """The flags that make gcc run the recipe's linker (none for the default)."""
    if ctx.plan.recipe.build.linker != "mold":
        return []
    programs = ctx.toolchain.deb_root / "usr" / "libexec" / "mold"
    if not (programs / "ld").exists():
        raise UserError(f"recipes/{ctx.plan.recipe.name}.toml: build.linker = \"mold\" but the "
                        f"toolchain has no {programs}/ld; add \"mold\" to [deb] packages of "
                        f"locks/{ctx.plan.recipe.lock}.toml and run `doit lock`")
    return [f"-B{programs}"]


def linker_defines(ctx: BuildContext, env: dict[str, str]) -> dict[str, str]:
    """CMAKE_<KIND>_LINKER_FLAGS with the linker's flags, then the environment's LDFLAGS
    (which CMake reads itself only when no such define is given)."""
    flags = linker_flags(ctx)
    if not flags:
        return {}
    value = " ".join(x for x in (*flags, env.get("LDFLAGS", "")) if x)
    return {name: value for name in LINKER_DEFINES}
