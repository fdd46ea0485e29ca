"""Installing a PyTorch build tree into the artifact: the named targets' directories (a
partial build), or everything plus torch._C and torch/'s Python files (a full build)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from orchestrator.builders.cmake_file_api import FileApiReply
from orchestrator.builders.cmake_steps import cmake_program
from orchestrator.builders.context import BuildContext
from orchestrator.builders.process import run_logged
from orchestrator.errors import UserError


def target_dirs(build_dir: Path, targets: list[str]) -> list[str]:
    """Build-tree directories (relative) defining the named targets, from CMake's file API."""
    reply = FileApiReply(build_dir)
    by_name = reply.targets()
    dirs: list[str] = []
    outputs = [t for t in targets if "/" in t]
    if outputs:
        check_ninja_outputs(build_dir, outputs)
    for name in targets:
        if "/" in name:  # a ninja output (an object file): compiled, nothing to install
            continue
        if name not in by_name:
            raise UserError(f"targets={name}: no such CMake target in this PyTorch source")
        target = reply.target(by_name[name])
        d = target.paths.build
        if target.type != "UTILITY" and d not in dirs:  # codegen targets install nothing
            dirs.append(d)
    return dirs


def check_ninja_outputs(build_dir: Path, outputs: list[str]) -> None:
    """targets= may name build outputs (`caffe2/CMakeFiles/torch_cpu.dir/.../x.cpp.o`), as
    `ninja <path>` does; an unknown one is bad input before anything compiles."""
    text = (build_dir / "build.ninja").read_text(errors="replace")
    for out in outputs:
        if f"\nbuild {out}:" not in text and f"\nbuild {out} " not in text:
            raise UserError(f"targets={out}: no such build output in {build_dir}/build.ninja; "
                            "give a CMake target or an object path as `ninja -t targets all` lists it")


def install_targets(ctx: BuildContext, env: dict[str, str], dirs: list[str]) -> None:
    """Partial build: run the install rules of the targets' directories (RPATH fixed up)."""
    for d in dirs:
        script = ctx.build_dir / d / "cmake_install.cmake"
        run_logged([cmake_program(ctx), f"-DCMAKE_INSTALL_PREFIX={ctx.prefix}", "-P", script],
                   env=env, log=ctx.log, title=f"install {d}")


def build_extensions(ctx: BuildContext, env: dict[str, str], py: dict[str, str],
                     build_type: str) -> list[str]:
    """torch._C / torch._C_flatbuffer: stub*.c linked to libtorch_python (as setup.py does)."""
    out_dir = ctx.prefix / "python" / "torch"
    out_dir.mkdir(parents=True, exist_ok=True)
    # distutils' -O2 -DNDEBUG, plus setup.py's -g (RelWithDebInfo) or -O0 -g (Debug).
    debug = {"Debug": ["-O0", "-g"], "RelWithDebInfo": ["-O2", "-DNDEBUG", "-g"]}.get(
        build_type, ["-O2", "-DNDEBUG"])
    built = []
    for mod, stub in (("_C", "stub.c"), ("_C_flatbuffer", "stub_with_flatbuffer.c")):
        src = ctx.source_dir / "torch" / "csrc" / stub
        if not src.is_file():
            continue
        so = out_dir / f"{mod}{py['ext_suffix']}"
        run_logged([ctx.toolchain.cc, "-shared", "-fPIC", "-fno-strict-aliasing", "-Wall",
                    *ctx.prefix_map_flags(), *debug, f"-I{py['include']}", str(src),
                    f"-L{ctx.prefix / 'lib'}", "-ltorch_python",
                    "-Wl,-rpath,$ORIGIN/lib", "-Wl,-rpath,$ORIGIN/../../lib", "-o", str(so)],
                   env=env, log=ctx.log, title=f"torch.{mod}")
        built.append(f"python/torch/{so.name}")
    return built


PY_SKIP_DIRS = {"csrc", "lib", "include", "share", "bin", "__pycache__", "test"}


def copy_python_package(ctx: BuildContext) -> None:
    """Full builds: torch/'s Python files (generated ones included) into prefix/python/torch,
    with lib/include/share linked to the prefix's, as setup.py's build_py lays a wheel out."""
    src, dest = ctx.source_dir / "torch", ctx.prefix / "python" / "torch"
    for dirpath, dirnames, filenames in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        dirnames[:] = sorted(d for d in dirnames if not (rel == Path(".") and d in PY_SKIP_DIRS)
                             and d != "__pycache__")
        for name in filenames:
            if name.endswith((".so", ".pyc")) or ".so." in name:
                continue
            out = dest / rel / name
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(Path(dirpath) / name, out, follow_symlinks=True)
    for d in ("lib", "include", "share", "bin"):
        if (ctx.prefix / d).is_dir() and not (dest / d).exists():
            (dest / d).symlink_to(Path("..") / ".." / d)
