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


# Where a targets= build keeps the CUDA objects it names (verify reads their fatbins).
KEPT_OBJECTS = "meta/objects"


def keep_cuda_objects(ctx: BuildContext, targets: list[str]) -> list[str]:
    """The CUDA objects (`*.cu.o`) a targets= build names, copied to meta/objects/<path>: an
    object is compiled, not installed, and this is how its fatbin reaches verify."""
    kept = []
    for t in targets:
        if "/" in t and t.endswith(".cu.o") and (ctx.build_dir / t).is_file():
            ctx.keep_copy(ctx.build_dir / t, f"{KEPT_OBJECTS}/{t}")
            kept.append(f"{KEPT_OBJECTS}/{t}")
    return kept


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


# setup.py's find_packages() besides torch (it excludes tools and caffe2): torch 2.x imports
# torchgen at start-up, and functorch is the standalone package over functorch._C.
COMPANION_PACKAGES = ("torchgen", "functorch")
# setup.py's mirror_files_into_torchgen(), then its package_data globs: torchgen/packaged/<dir>
# holds the files (not the subdirectories) of each source directory; a file maps to a file.
TORCHGEN_PACKAGED = (("ATen/native/native_functions.yaml", "aten/src/ATen/native/native_functions.yaml"),
                     ("ATen/native/tags.yaml", "aten/src/ATen/native/tags.yaml"),
                     ("ATen/templates", "aten/src/ATen/templates"),
                     ("autograd", "tools/autograd"),
                     ("autograd/templates", "tools/autograd/templates"))


def copy_companion_packages(ctx: BuildContext, py: dict[str, str]) -> list[str]:
    """Full builds: torchgen and functorch beside torch in prefix/python, as a wheel has them:
    their Python packages (directories with an __init__.py, as find_packages finds them),
    torchgen/packaged's mirrored files, and functorch/_C from the functorch.so that CMake
    installs into the source tree (its RUNPATH, $ORIGIN/../torch/lib, finds prefix/lib
    through torch/lib). Returns the extension modules carried."""
    carried = []
    for name in COMPANION_PACKAGES:
        src = ctx.source_dir / name
        if not (src / "__init__.py").is_file():
            continue
        dest = ctx.prefix / "python" / name
        for dirpath, dirnames, filenames in os.walk(src):
            dirnames[:] = sorted(d for d in dirnames if (Path(dirpath) / d / "__init__.py").is_file())
            for f in filenames:
                if f.endswith((".py", ".pyi")):
                    out = dest / Path(dirpath).relative_to(src) / f
                    out.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(Path(dirpath) / f, out)
        if name == "torchgen":
            for target, origin in TORCHGEN_PACKAGED:
                orig = ctx.source_dir / origin
                if not orig.exists():   # a tree older than the mirror's list
                    continue
                files = [orig] if orig.is_file() else sorted(p for p in orig.iterdir() if p.is_file())
                for f in files:
                    out = dest / "packaged" / target if orig.is_file() else dest / "packaged" / target / f.name
                    out.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(f, out)
        built = src / "functorch.so"
        if name == "functorch" and built.is_file():
            so = dest / f"_C{py['ext_suffix']}"
            shutil.copy2(built, so)
            carried.append(f"python/functorch/{so.name}")
    return carried
