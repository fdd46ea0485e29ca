"""PyTorch: drive its CMake build the way its setup.py would, one build tree per variant.

PyTorch's own driver (setup.py, or scikit-build-core in newer revisions) hard-codes
`build/`, skips configure once build/CMakeCache.txt exists and installs into <src>/torch,
so two variants of one checkout would share a CMakeCache. We run CMake ourselves instead,
with the defines that driver derives from the environment (CMAKE_BUILD_TYPE wins over
DEBUG / REL_WITH_DEB_INFO; BUILD_*, USE_*, CMAKE_* become -D), into the per-variant build
tree the store gives us, and install into the artifact. torch._C is compiled from
torch/csrc/stub.c against libtorch_python as setup.py does.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

from filelock import FileLock

from orchestrator.builders import BuildContext
from orchestrator.builders.cmake import (collect_meta, compile_, configure, define_value,
                                         install)
from orchestrator.builders.process import run_logged
from orchestrator.errors import UserError
from orchestrator.fs import remove_tree, write_atomic
from orchestrator.hashing import digest_of, pretty_json
from orchestrator.model.pytorch_options import PyTorchOptions

TRUE_FLAGS = ("ON", "1", "YES", "TRUE", "Y")
FALSE_FLAGS = ("OFF", "0", "NO", "FALSE", "N")

# tools/setup_helpers/cmake.py: env vars passed to CMake that do not start with BUILD_/USE_/CMAKE_.
RENAMED_ENV = {"_GLIBCXX_USE_CXX11_ABI": "GLIBCXX_USE_CXX11_ABI", "CUDNN_LIB_DIR": "CUDNN_LIBRARY",
               "USE_CUDA_STATIC_LINK": "CAFFE2_STATIC_LINK_CUDA"}
PASSED_ENV = (
    "BLAS", "WITH_BLAS", "BUILDING_WITH_TORCH_LIBS", "CUDA_HOST_COMILER", "CUDA_NVCC_EXECUTABLE",
    "CUDA_SEPARABLE_COMPILATION", "CUDNN_LIBRARY", "CUDNN_INCLUDE_DIR", "CUDNN_ROOT",
    "EXPERIMENTAL_SINGLE_THREAD_POOL", "INSTALL_TEST", "JAVA_HOME", "INTEL_MKL_DIR",
    "INTEL_OMP_DIR", "MKL_THREADING", "MKLDNN_CPU_RUNTIME", "MSVC_Z7_OVERRIDE",
    "CAFFE2_USE_MSVC_STATIC_RUNTIME", "Numa_INCLUDE_DIR", "Numa_LIBRARIES", "ONNX_ML",
    "ONNX_NAMESPACE", "ATEN_THREADING", "WERROR", "OPENSSL_ROOT_DIR", "STATIC_DISPATCH_BACKEND",
    "SELECTED_OP_LIST", "TRACING_BASED")
# Set by the driver itself; setup.py refuses them from the environment.
DRIVER_OWNED = ("CMAKE_INSTALL_PREFIX",)
# Generated sources a debugger needs to step through (relative to build dir / source dir).
GENERATED_IN_BUILD = ("aten/src/ATen/Register*.cpp", "aten/src/ATen/Operators*.cpp",
                      "aten/src/ATen/core/*.h", "aten/src/ATen/*.h", "c10/macros/cmake_macros.h")
GENERATED_IN_SOURCE = ("torch/csrc/autograd/generated/*", "torch/csrc/lazy/generated/*")


# -- facts of PyTorch's drivers ---------------------------------------------------------
def detect_driver(src: Path) -> str:
    """'setuptools' (setup.py → cmake) or 'scikit-build-core' (pyproject build backend)."""
    pyproject = src / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text())
        except tomllib.TOMLDecodeError as e:
            raise UserError(f"{pyproject}: malformed TOML ({e}); fix the checkout") from None
        backend = str(data.get("build-system", {}).get("build-backend", ""))
        if backend.startswith("scikit_build_core"):
            return "scikit-build-core"
    if (src / "setup.py").is_file():
        return "setuptools"
    raise UserError(f"{src}: neither setup.py nor a scikit-build-core pyproject.toml; "
                    "is this a PyTorch checkout?")


def skbuild_defines(src: Path) -> dict[str, str]:
    """[tool.scikit-build] cmake.define of a scikit-build-core pyproject."""
    data = tomllib.loads((src / "pyproject.toml").read_text())
    sk = data.get("tool", {}).get("scikit-build", {})
    defines = sk.get("cmake", {}).get("define", {}) or sk.get("cmake.define", {})
    return {k: define_value(v) if isinstance(v, (bool, int, str)) else str(v)
            for k, v in defines.items()}


def env_flag(env: dict[str, str], name: str) -> bool:
    return env.get(name, "").upper() in TRUE_FLAGS


def build_type_from_env(env: dict[str, str]) -> str:
    """tools/setup_helpers/env.py: CMAKE_BUILD_TYPE wins, then DEBUG, then REL_WITH_DEB_INFO."""
    if "CMAKE_BUILD_TYPE" in env:
        return env["CMAKE_BUILD_TYPE"]
    if env_flag(env, "DEBUG"):
        return "Debug"
    if env_flag(env, "REL_WITH_DEB_INFO"):
        return "RelWithDebInfo"
    return "Release"


def defines_from_env(env: dict[str, str]) -> dict[str, str]:
    """tools/setup_helpers/cmake.py: which environment variables become -D defines."""
    out: dict[str, str] = {}
    for var, val in env.items():
        if var in RENAMED_ENV:
            out[RENAMED_ENV[var]] = val
        elif var in PASSED_ENV or var.startswith(("BUILD_", "USE_", "CMAKE_")) \
                or var.endswith(("EXITCODE", "EXITCODE__TRYRUN_OUTPUT")):
            out[var] = val
    owned = sorted(set(out) & set(DRIVER_OWNED))
    if owned:
        raise UserError(f"{owned[0]} is set by the PyTorch driver; remove it from the recipe's env")
    return out


# -- the build's environment and defines ------------------------------------------------
def options_of(ctx: BuildContext) -> PyTorchOptions:
    opts = getattr(ctx.plan.recipe.build, "pytorch", None)
    return opts if isinstance(opts, PyTorchOptions) else PyTorchOptions()


def build_env(ctx: BuildContext, opts: PyTorchOptions) -> dict[str, str]:
    """Toolchain environment + the recipe's options + its free-form env, nothing else."""
    env = dict(ctx.env)
    env.update({
        "USE_CUDA": "1" if opts.cuda else "0",
        "USE_DISTRIBUTED": "1" if opts.distributed else "0",
        "BUILD_TEST": "1" if opts.build_test else "0",
        "MAX_JOBS": str(ctx.jobs),
    })
    if opts.system_libs:
        env["USE_SYSTEM_LIBS"] = "ON"
    if opts.cuda_arch_list:
        env["TORCH_CUDA_ARCH_LIST"] = opts.cuda_arch_list
    for name in opts.disable:
        env[f"USE_{name}"] = "0"
    env.update(ctx.plan.variant.env)  # the recipe's own env wins over the options
    if "CMAKE_BUILD_TYPE" not in ctx.plan.variant.env:
        env["CMAKE_BUILD_TYPE"] = ctx.plan.variant.build_type
    if env_flag(env, "USE_CUDA") and not env.get("TORCH_CUDA_ARCH_LIST"):
        raise UserError(f"recipes/{ctx.plan.recipe.name}.toml: CUDA is on but TORCH_CUDA_ARCH_LIST "
                        "is not set; add cuda_arch_list = \"8.0;9.0\" to [build.pytorch]")
    return env


# Major versions of PyTorch source trees this builder drives (setup.py's CMake defines, the
# layout of torch/csrc and torch/lib): 1.x (from 1.13) and 2.x.
SUPPORTED_MAJORS = (1, 2)
VERSION_RE = re.compile(r"^(\d+)\.(\d+)(\.\d+)?([A-Za-z0-9.+_-]*)$")
SUPPORTED_TEXT = ("the pytorch builder handles PyTorch 1.x and 2.x source trees "
                  "(version.txt and setup.py, or a scikit-build-core pyproject.toml, at the root)")


def tree_version(src: Path, where: str) -> str:
    """The version a PyTorch tree's version.txt says, checked to be one this builder drives;
    anything else is one line naming what was found and what is supported."""
    vfile = src / "version.txt"
    missing = [] if vfile.is_file() else ["version.txt"]
    try:
        detect_driver(src)
    except UserError:
        missing.append("setup.py")
    if missing:
        raise UserError(f"{where}: {src} has no {' and no '.join(missing)}; {SUPPORTED_TEXT}")
    text = vfile.read_text(errors="replace").strip()
    m = VERSION_RE.match(text)
    if not m:
        raise UserError(f"{where}: {vfile} says {text[:40]!r}, not a version; {SUPPORTED_TEXT}")
    if int(m[1]) not in SUPPORTED_MAJORS:
        raise UserError(f"{where}: {src} is PyTorch {text} (version.txt); {SUPPORTED_TEXT}")
    return text


def torch_version(ctx: BuildContext, opts: PyTorchOptions) -> str:
    """TORCH_BUILD_VERSION: a pinned source's recipe version (else its version.txt); a
    checkout's own version.txt + git rev (setup.py's `<version>+git<sha7>`), whatever the
    recipe pins: the recipe describes its pinned tree, not the user's."""
    if ctx.plan.source.extra.get("checkout"):
        where = ctx.plan.source.extra.get("checkout_dir") or ctx.source_dir
        version = tree_version(ctx.source_dir, f"source={where}")
        rev = ctx.plan.source.extra.get("git_rev")
        return f"{version}+git{rev[:7]}" if rev else version
    if opts.version:
        return opts.version
    vfile = ctx.source_dir / "version.txt"
    version = vfile.read_text().strip() if vfile.is_file() else "0.0.0"
    rev = ctx.plan.source.extra.get("git_rev")
    return f"{version}+git{rev[:7]}" if rev else version


def python_facts(python: Path) -> dict[str, str]:
    code = ("import json,sysconfig;print(json.dumps({'include':sysconfig.get_path('include'),"
            "'purelib':sysconfig.get_path('purelib'),'ext_suffix':sysconfig.get_config_var('EXT_SUFFIX')}))")
    out = json.loads(subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                                    check=True).stdout)
    res = subprocess.run([str(python), "-c", "import numpy;print(numpy.get_include())"],
                         capture_output=True, text=True)
    out["numpy_include"] = res.stdout.strip() if res.returncode == 0 else ""
    return out


def pytorch_defines(ctx: BuildContext, opts: PyTorchOptions, env: dict[str, str],
                    driver: str, py: dict[str, str]) -> dict[str, str]:
    """The -D list PyTorch's driver would pass, then the recipe's explicit defines."""
    defines: dict[str, str] = {}
    if driver == "scikit-build-core":
        defines.update(skbuild_defines(ctx.source_dir))
    defines.update(defines_from_env(env))
    defines.update({
        "CMAKE_BUILD_TYPE": build_type_from_env(env),
        "BUILD_PYTHON": "True",
        "BUILD_TEST": "True" if env_flag(env, "BUILD_TEST") else "False",
        "USE_NUMPY": "True" if py["numpy_include"] and not env.get("USE_NUMPY", "1").upper()
        in FALSE_FLAGS else "False",
        "PYTHON_EXECUTABLE": str(ctx.toolchain.python),
        "PYTHON_INCLUDE_DIR": py["include"],
        "TORCH_BUILD_VERSION": torch_version(ctx, opts),
        "CMAKE_PREFIX_PATH": ";".join(p for p in (py["purelib"], env.get("CMAKE_PREFIX_PATH")) if p),
    })
    if py["numpy_include"]:
        defines["NUMPY_INCLUDE_DIR"] = py["numpy_include"]
    flags = " ".join(ctx.prefix_map_flags() + ctx.plan.variant.cflags)
    defines["CMAKE_C_FLAGS"] = " ".join(x for x in (flags, env.get("CFLAGS", "")) if x)
    defines["CMAKE_CXX_FLAGS"] = " ".join(
        x for x in (flags, env.get("CXXFLAGS", env.get("CFLAGS", ""))) if x)
    defines.update({k: define_value(v) for k, v in ctx.plan.variant.defines.items()})
    return defines


# -- steps ------------------------------------------------------------------------------
def target_dirs(build_dir: Path, targets: list[str]) -> list[str]:
    """Build-tree directories (relative) defining the named targets, from CMake's file API."""
    reply = build_dir / ".cmake" / "api" / "v1" / "reply"
    index = sorted(reply.glob("index-*.json"))
    if not index:
        raise UserError(f"{build_dir}: CMake file-API reply missing; delete the build tree and rebuild")
    idx = json.loads(index[-1].read_text())
    cm = next(o for o in idx["objects"] if o["kind"] == "codemodel")
    model = json.loads((reply / cm["jsonFile"]).read_text())
    by_name = {t["name"]: t for t in model["configurations"][0]["targets"]}
    dirs: list[str] = []
    outputs = [t for t in targets if "/" in t]
    if outputs:
        check_ninja_outputs(build_dir, outputs)
    for name in targets:
        if "/" in name:  # a ninja output (an object file): compiled, nothing to install
            continue
        if name not in by_name:
            raise UserError(f"targets={name}: no such CMake target in this PyTorch source")
        data = json.loads((reply / by_name[name]["jsonFile"]).read_text())
        d = data["paths"]["build"]
        if data.get("type") != "UTILITY" and d not in dirs:  # codegen targets install nothing
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
        run_logged([ctx.toolchain.cmake, f"-DCMAKE_INSTALL_PREFIX={ctx.prefix}", "-P", script],
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


def source_lock(ctx: BuildContext) -> FileLock:
    """PyTorch's codegen writes into the tree it builds: one build per such tree at a time
    (a pinned source's per-build copy, or the checkout)."""
    key = hashlib.sha256(str(ctx.source_dir).encode()).hexdigest()[:16]
    locks = ctx.build_dir.parent.parent / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    return FileLock(str(locks / f"pytorch-source-{key}.lock"))


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
                if not f.is_file():
                    continue
                rel = f"{logical.removeprefix('/orch/')}/{f.relative_to(root).as_posix()}"
                dest = ctx.meta / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, dest)
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
    """setup.py merges build/*compile_commands.json into one file; we keep the merged one."""
    files = sorted(ctx.build_dir.glob("*compile_commands.json"))
    entries: list[Any] = []
    for f in files:
        entries += json.loads(f.read_text())
    if entries:
        (ctx.meta / "compile_commands.json").write_text(json.dumps(entries, indent=1))


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
    return links


SOURCE_COPY = "source"
SOURCE_COPY_STAMP = ".orch-source-copy.json"


def build_copy_of_source(ctx: BuildContext) -> BuildContext:
    """A pinned source is shared by every variant and must stay as unpacked: PyTorch's
    codegen writes into its source tree (version.h, Config.h, autograd/generated, __pycache__),
    so a pinned tree is built from a copy inside the build tree, made once per source identity
    (mtimes kept, so a re-copy rebuilds only what changed). So is a checkout's patched copy
    (`patch_checkouts`: it lives in the store's sources/ too). A plain checkout builds in
    place, as `setup.py develop` would."""
    if ctx.plan.source.extra.get("checkout") and not ctx.plan.source.extra.get("patched_copy"):
        return ctx  # (a checkout's patched copy is in the store's sources/: copied like a pin)
    dest = ctx.build_dir / SOURCE_COPY
    stamp = ctx.build_dir / SOURCE_COPY_STAMP
    wanted = digest_of(ctx.plan.source.identity)
    if not (dest.is_dir() and stamp.is_file() and json.loads(stamp.read_text()).get("digest") == wanted):
        ctx.build_dir.mkdir(parents=True, exist_ok=True)
        tmp = ctx.build_dir / f".{SOURCE_COPY}.tmp-{os.getpid()}"
        remove_tree(tmp)
        res = subprocess.run(["cp", "-a", "--reflink=auto", f"{ctx.source_dir}/.", str(tmp)],
                             capture_output=True, text=True)
        if res.returncode != 0:
            remove_tree(tmp)
            raise UserError(f"copying the pinned source into {ctx.build_dir} failed: "
                            f"{res.stderr.strip()[-200:]}")
        stamp.unlink(missing_ok=True)
        remove_tree(dest)
        os.rename(tmp, dest)
        write_atomic(stamp, json.dumps({"digest": wanted, "from": str(ctx.source_dir)}))
    return dataclasses.replace(ctx, source_dir=dest)


class PyTorchBuilder:
    def build(self, ctx: BuildContext) -> BuildContext:
        ctx = build_copy_of_source(ctx)
        opts = options_of(ctx)
        driver = detect_driver(ctx.source_dir)
        env = build_env(ctx, opts)
        py = python_facts(ctx.toolchain.python)
        defines = pytorch_defines(ctx, opts, env, driver, py)
        ctx.build_dir.mkdir(parents=True, exist_ok=True)
        targets = ctx.plan.variant.targets
        extensions: list[str] = []
        with source_lock(ctx):
            configured = configure(ctx, env, defines, file_api=True)
            dirs = target_dirs(ctx.build_dir, targets) if targets else []  # unknown name: exit 2
            compile_(ctx, env)
            ctx.prefix.mkdir(parents=True, exist_ok=True)
            if targets:
                install_targets(ctx, env, dirs)
            else:
                install(ctx, env)
                if opts.python_extension:
                    extensions = build_extensions(ctx, env, py, defines["CMAKE_BUILD_TYPE"])
                    copy_python_package(ctx)
            collect_meta(ctx)
            link_compile_commands_into_meta(ctx)
            generated = collect_generated(ctx)
        cache = ctx.build_dir / "CMakeCache.txt"
        info = {
            "driver": driver,
            "configured_now": configured,
            "build_type": cache_value(cache, "CMAKE_BUILD_TYPE"),
            "glibcxx_use_cxx11_abi": cxx11_abi(ctx, defines, env),
            "torch_version": defines["TORCH_BUILD_VERSION"],
            "targets": targets,
            "defines": defines,
            "env": {k: v for k, v in sorted(env.items()) if k not in ("PATH", "HOME", "TERM")},
            "prefix_map": ctx.prefix_map(),
            "extensions": extensions,
            "generated": generated,
        }
        (ctx.meta / "pytorch.json").write_text(pretty_json(info))
        (ctx.meta / "workspace-links.json").write_text(pretty_json({"links": checkout_links(ctx)}))
        return ctx


__all__ = ["PyTorchBuilder", "detect_driver", "build_type_from_env", "defines_from_env",
           "build_env", "pytorch_defines", "target_dirs", "tree_version", "SUPPORTED_MAJORS"]
