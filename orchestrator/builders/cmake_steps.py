"""The steps of a CMake + Ninja build tree from the toolchain (configure once per tree,
build, install, meta/), shared by the cmake and pytorch builders and the IDE presets."""
from __future__ import annotations

import json
import os
from pathlib import Path

from orchestrator.builders import cmake_file_api, relink, source_mtimes
from orchestrator.builders.compile_cache.source_link import SOURCE_LINK, source_link, source_link_flags
from orchestrator.builders.compile_cache.stats import STATS_LOG
from orchestrator.builders.context import BuildContext
from orchestrator.builders.linker import linker_defines
from orchestrator.builders.process import NINJA_STATUS, run_logged
from orchestrator.console import console
from orchestrator.fs import remove_tree
from orchestrator.hashing import digest_of
from orchestrator.memo import head_start
from orchestrator.model.store_layout import TOOLCHAIN_JSON
from orchestrator.toolchain import cuda_toolkit

CONFIGURE_STAMP = ".orch-configure.json"


def define_value(v: bool | int | str) -> str:
    if isinstance(v, bool):
        return "ON" if v else "OFF"
    return str(v)


def configure_args(ctx: BuildContext, overrides: dict[str, str] | None = None,
                   extra_flags: list[str] | None = None) -> list[str]:
    """-G Ninja and one -D per define: ours, then the builder's overrides, then the variant's
    (each name once, so a flag set by two layers never appears twice on a compile line)."""
    tc, var = ctx.toolchain, ctx.plan.variant
    flags = " ".join([*ctx.prefix_map_flags(), *ctx.split_dwarf_flags(), *(extra_flags or []),
                      *var.cflags])
    defines: dict[str, str] = {
        "CMAKE_BUILD_TYPE": var.build_type,
        "CMAKE_EXPORT_COMPILE_COMMANDS": "ON",
        "CMAKE_MAKE_PROGRAM": str(tc.ninja),
        "CMAKE_C_COMPILER": str(tc.cc),
        "CMAKE_CXX_COMPILER": str(tc.cxx),
        "CMAKE_C_FLAGS": flags,
        "CMAKE_CXX_FLAGS": flags,
        "CMAKE_INSTALL_PREFIX": "/orch/prefix",
        "Python3_EXECUTABLE": str(tc.python),
        "Python_EXECUTABLE": str(tc.python),
        "Python3_FIND_VIRTUALENV": "ONLY",
    }
    if tc.nvcc is not None:
        defines["CMAKE_CUDA_COMPILER"] = str(tc.nvcc)
    if tc.cuda_root is not None:
        defines["CUDAToolkit_ROOT"] = str(tc.cuda_root)
        check_cuda_architectures(ctx)
    defines.update(relink.NO_SHARED)  # builders/relink.py settles what that leaves stale
    defines.update(locked_package_hints(ctx))
    defines.update(linker_defines(ctx, ctx.env))
    defines.update(ctx.compile_cache.cmake_defines())
    defines.update(overrides or {})
    defines.update({k: define_value(v) for k, v in var.defines.items()})
    return ["-G", "Ninja", *(f"-D{k}={v}" for k, v in sorted(defines.items()))]


def check_cuda_architectures(ctx: BuildContext) -> None:
    """The variant's CMAKE_CUDA_ARCHITECTURES against what the locked nvcc supports (recorded
    in toolchain.json at materialization): one line, exit 2, before cmake runs."""
    spec = ctx.plan.variant.defines.get("CMAKE_CUDA_ARCHITECTURES")
    facts = cuda_toolkit.toolchain_facts(ctx.toolchain.root / TOOLCHAIN_JSON)
    if spec is None or facts is None:
        return
    archs = facts.get("architectures")
    cuda_toolkit.check_architectures(str(define_value(spec)),
                                     [str(a) for a in archs] if isinstance(archs, list) else [],
                                     str(facts.get("version")),
                                     f"recipes/{ctx.plan.recipe.name}.toml variant {ctx.plan.variant_name}")


# Locked wheels that ship CMake package configs: find_package(Torch) / (pybind11) unaided.
CMAKE_PACKAGE_DIRS = {"pypi:torch": "torch/share/cmake", "pypi:pybind11": "pybind11/share/cmake"}


def locked_package_hints(ctx: BuildContext) -> dict[str, str]:
    """CMAKE_PREFIX_PATH to the CMake configs of the locked wheels the recipe uses (only then:
    other recipes' defines stay as they are). Absolute, but only on the command line: the
    derivation names the wheels by hash."""
    sp = ctx.toolchain.site_packages()
    dirs = [str(sp / rel) for key, rel in CMAKE_PACKAGE_DIRS.items() if key in ctx.plan.inputs]
    return {"CMAKE_PREFIX_PATH": ";".join(dirs)} if dirs else {}


def configure(ctx: BuildContext, env: dict[str, str] | None = None,
              overrides: dict[str, str] | None = None, file_api: bool = False,
              linked_source: bool = False, source_subdir: str = ".",
              extra_args: list[str] | None = None, link_name: str = SOURCE_LINK) -> bool:
    """Run cmake only when the tree is new or the configure arguments changed.

    overrides replace our defines of the same name (the variant's still win); file_api asks
    CMake for its codemodel (targets → directories) in .cmake/api/v1/reply; linked_source
    configures the source through compile_cache.source_link (path-free compile lines, so the
    compile cache hits across checkouts; link_name: the link's name in the build tree);
    source_subdir: the CMakeLists.txt's directory in
    the tree; extra_args come after the -D list (scikit-build-core's cmake.args). Returns
    whether cmake ran.
    """
    source: Path = ctx.source_dir
    agree_with_content(ctx)
    flags: list[str] = []
    if linked_source:
        source = source_link(ctx.build_dir, ctx.source_dir, link_name)
        flags = source_link_flags(source, ctx.logical_source)
    source = source / source_subdir if source_subdir != "." else source
    args = [*configure_args(ctx, overrides, flags), *(extra_args or [])]
    stamp = ctx.build_dir / CONFIGURE_STAMP
    wanted = digest_of({"args": args, "source": str(ctx.source_dir / source_subdir)})
    if (ctx.build_dir / "build.ninja").is_file() and (ctx.build_dir / "CMakeCache.txt").is_file() \
            and stamp.is_file() and json.loads(stamp.read_text()).get("digest") == wanted:
        return False
    head_start.stop()  # cmake must not write the tree a head start's ninja reads
    ctx.build_dir.mkdir(parents=True, exist_ok=True)
    if file_api:
        cmake_file_api.write_query(ctx.build_dir)
    forget_other_source(ctx.build_dir, source)
    run_logged([ctx.toolchain.cmake, "-S", source, "-B", ctx.build_dir, *args],
               env=env or ctx.env, log=ctx.log, title="configure")
    stamp.write_text(json.dumps({"digest": wanted}))
    return True


def forget_other_source(build_dir: Path, source: Path) -> None:
    """A tree configured from another source path (a checkout's tree from before its link
    was named `source`) is configured afresh: cmake refuses a cache made for another source
    directory. Its outputs stay; the changed compile lines rebuild them."""
    cache = build_dir / "CMakeCache.txt"
    if not cache.is_file():
        return
    home = next((ln.split("=", 1)[1] for ln in cache.read_text(errors="replace").splitlines()
                 if ln.startswith("CMAKE_HOME_DIRECTORY:")), None)
    if home is not None and home != str(source):
        cache.unlink()
        remove_tree(build_dir / "CMakeFiles")


def agree_with_content(ctx: BuildContext) -> None:
    """Before cmake and ninja: a source file whose content changed under an old mtime is
    touched (source_mtimes), and a head start's ninja, which may have passed it, stopped."""
    if not (ctx.build_dir / "build.ninja").is_file():
        return  # a new tree builds everything
    touched = source_mtimes.agree(ctx.source_dir, ctx.build_dir)
    if touched:
        head_start.stop()
        console.print(f"{len(touched)} source file(s) changed under an older mtime (first: "
                      f"{touched[0]}): touched, so ninja rebuilds what uses them", markup=False)


def compile_(ctx: BuildContext, env: dict[str, str] | None = None,
             may_head_start: bool = False, locks: tuple[Path, ...] = ()) -> None:
    """ninja in the build tree; meta/ninja_log gets this build's steps only (the tree's
    .ninja_log is cumulative: we keep what ninja appended during this run).

    may_head_start: the builder runs nothing between configure and ninja that writes, so the
    next build of this command may start this ninja ahead of the planner (head_start.py),
    holding `locks` (the lock files the builder holds around ninja, besides the tree's); it
    is adopted here when it is this very ninja."""
    keep_going = ["-k", "0"] if ctx.keep_going else []
    log = ctx.build_dir / ".ninja_log"
    argv = [str(a) for a in (ctx.toolchain.ninja, "-C", ctx.build_dir, "-j", str(ctx.jobs),
                             *keep_going, *ctx.plan.variant.targets)]
    run_env = {**(env or ctx.env), "NINJA_STATUS": NINJA_STATUS}
    if may_head_start and ctx.compile_cache.shares_nothing:
        head_start.remember_ninja(ctx.build_dir, argv, run_env, [
            ctx.toolchain.ninja, ctx.toolchain.cc, ctx.toolchain.cxx,
            *([ctx.compile_cache.binary] if ctx.compile_cache.enabled and ctx.compile_cache.binary
              else []), ctx.toolchain.root / TOOLCHAIN_JSON],
            ctx.build_dir / STATS_LOG if ctx.compile_cache.enabled else None, locks)
    elif may_head_start:
        head_start.forget(ctx.build_dir)
    with head_start.adopting(argv, run_env) as (ahead, stopped_other):
        if stopped_other:
            console.print("[dim]head start stopped: the plan runs another ninja (its "
                          "outputs are removed)[/]")
        before = ahead.before if ahead is not None else (log.stat().st_size if log.is_file() else 0)
        try:
            run_logged(argv, env=run_env, log=ctx.log, title="build",
                       adopted=None if ahead is None else (ahead.step, ahead.output(), ahead.t0))
            stale = relink.settle(ctx.build_dir, lambda: run_logged(
                argv, env=run_env, log=ctx.log, title="relink"))
            if stale:
                console.print(f"relinked {', '.join(stale)}: a shared library it links has "
                              "another interface now", markup=False)
            source_mtimes.record(ctx.source_dir, ctx.build_dir)
        finally:
            keep_ninja_steps(log, before, ctx.meta / "ninja_log")


def keep_ninja_steps(log: Path, offset: int, dest: Path) -> None:
    """Copy the header and the entries after `offset` (all of them when ninja recompacted
    its log meanwhile, i.e. rewrote it shorter, or when it was new)."""
    if not log.is_file():
        return
    header, _, entries = log.read_bytes().partition(b"\n")
    total = len(header) + 1 + len(entries)
    if 0 < offset <= total:
        entries = (header + b"\n" + entries)[offset:]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(header + b"\n" + entries)


def install(ctx: BuildContext, env: dict[str, str] | None = None) -> None:
    run_logged([cmake_program(ctx), "--install", ctx.build_dir, "--prefix", ctx.prefix],
               env=env or ctx.env, log=ctx.log, title="install")


def cmake_program(ctx: BuildContext) -> Path:
    """The cmake binary of the locked cmake wheel, else the toolchain's `cmake`. The wheel's
    venv/bin/cmake is a Python script that reads the wheel's file list only to exec this very
    binary with the same arguments and environment: 0.05-0.1 s of every install."""
    wheel = ctx.toolchain.site_packages() / "cmake" / "data" / "bin" / "cmake"
    return wheel if wheel.is_file() and os.access(wheel, os.X_OK) else ctx.toolchain.cmake


def collect_meta(ctx: BuildContext) -> None:
    ctx.meta.mkdir(parents=True, exist_ok=True)
    for name, dest in (("CMakeCache.txt", "CMakeCache.txt"),
                       ("compile_commands.json", "compile_commands.json")):
        src = ctx.build_dir / name
        if src.is_file():
            ctx.keep_copy(src, f"meta/{dest}")

