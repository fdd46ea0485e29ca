"""What PyTorch's own driver (setup.py's tools/setup_helpers, or scikit-build-core) would
pass to CMake: the environment it reads, the -D defines it derives, TORCH_BUILD_VERSION."""
from __future__ import annotations

import contextlib
import json
import re
import subprocess
from pathlib import Path

from orchestrator.builders.cmake_steps import define_value
from orchestrator.builders.compile_cache.source_link import source_link_flags
from orchestrator.builders.context import BuildContext
from orchestrator.builders.linker import linker_defines
from orchestrator.builders.pytorch_source import SOURCE_COPY
from orchestrator.errors import UserError
from orchestrator.fs import write_atomic
from orchestrator.memo.file_reads import stat_sig
from orchestrator.model.cuda_arch import cmake_architectures
from orchestrator.model.pytorch_options import PyTorchOptions
from orchestrator.model.store_layout import TOOLCHAIN_JSON
from orchestrator.sources.skbuild_settings import STATE, SkbuildConfig, read_skbuild, version_in
from orchestrator.sources.tree_version import read_pyproject, tree_version
from orchestrator.toolchain import cuda_toolkit

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


def frontend_of(ctx: BuildContext, driver: str, env: dict[str, str]) -> SkbuildConfig | None:
    """A scikit-build-core tree's [tool.scikit-build], resolved for this build's environment
    as the recipe lock's pypi:scikit-build-core (else the one the reader follows) would."""
    if driver != "scikit-build-core":
        return None
    return read_skbuild(ctx.source_dir, read_pyproject(ctx.source_dir), env,
                        version_in(ctx.plan.lock))


def skbuild_cache(ctx: BuildContext, opts: PyTorchOptions, py: dict[str, str],
                  frontend: SkbuildConfig) -> dict[str, str]:
    """What scikit-build-core itself puts in the cache besides cmake.define (its SKBUILD_*
    and FindPython hints), for a tree whose CMakeLists.txt reads them."""
    project = read_pyproject(ctx.source_dir).get("project", {})
    release = torch_version(ctx, opts).split("+")[0]
    out = {"SKBUILD": "2", "SKBUILD_CORE_VERSION": frontend.read_as, "SKBUILD_STATE": STATE,
           "SKBUILD_PROJECT_VERSION": ".".join(re.findall(r"\d+", release)[:4])}
    if isinstance(project, dict) and project.get("name"):
        out["SKBUILD_PROJECT_NAME"] = re.sub(r"[-.]", "_", str(project["name"]))
    for prefix in ("Python", "Python3"):
        out[f"{prefix}_EXECUTABLE"] = str(ctx.toolchain.python)
        out[f"{prefix}_INCLUDE_DIR"] = py["include"]
    return out


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
    # tools/generate_torch_version.py (the build's torch/version.py) reads these, as setup.py
    # sets them: else torch.__version__ is version.txt's ("1.13.0a0" for the pinned 1.13.1).
    env["PYTORCH_BUILD_VERSION"] = torch_version(ctx, opts)
    env["PYTORCH_BUILD_NUMBER"] = "0"
    # ATen's codegen iterates Python sets (RegisterSchema.cpp's tag lists came out in another
    # order in a rebuild): a fixed hash seed makes the generated sources the same every time.
    env["PYTHONHASHSEED"] = "0"
    if env_flag(env, "USE_CUDA") and not env.get("TORCH_CUDA_ARCH_LIST"):
        raise UserError(f"recipes/{ctx.plan.recipe.name}.toml: CUDA is on but TORCH_CUDA_ARCH_LIST "
                        "is not set; add cuda_arch_list = \"8.0;9.0\" to [build.pytorch]")
    return env


def check_cuda_arch_list(ctx: BuildContext, env: dict[str, str]) -> None:
    """A CUDA build's TORCH_CUDA_ARCH_LIST against what the locked nvcc supports (recorded in
    toolchain.json at materialization): one line, exit 2, before anything is copied or
    configured. (A CUDA build without a toolkit in its lock is refused at plan time:
    cuda_toolkit.check_recipe_has_toolkit.)"""
    if not env_flag(env, "USE_CUDA"):
        return
    facts = cuda_toolkit.toolchain_facts(ctx.toolchain.root / TOOLCHAIN_JSON)
    if facts is None:
        return
    archs = facts.get("architectures")
    given = env["TORCH_CUDA_ARCH_LIST"]
    cuda_toolkit.check_architectures(cmake_architectures(given),
                                     [str(a) for a in archs] if isinstance(archs, list) else [],
                                     str(facts.get("version")),
                                     f"recipes/{ctx.plan.recipe.name}.toml variant {ctx.plan.variant_name}",
                                     setting="TORCH_CUDA_ARCH_LIST", given=given)


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


PYTHON_FACTS = ".orch-python-facts.json"  # in the build tree, under the interpreter's stat
_FACTS_CODE = """import json, sysconfig
try:
    import numpy
    numpy_include = numpy.get_include()
except Exception:
    numpy_include = ""
print(json.dumps({"include": sysconfig.get_path("include"),
                  "purelib": sysconfig.get_path("purelib"),
                  "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX"),
                  "numpy_include": numpy_include}))
"""


def python_facts(python: Path, build_dir: Path) -> dict[str, str]:
    """The toolchain interpreter's include/purelib dirs, extension suffix and numpy's include
    dir (empty without numpy). Asked once per build tree and kept there (PYTHON_FACTS) under
    the stat of the interpreter and of its venv's site-packages: asking costs 0.2-0.35 s."""
    purelib_dirs = sorted(str(p) for p in python.parent.parent.glob("lib/python3*/site-packages"))
    key = [[p, stat_sig(p)] for p in (str(python), *purelib_dirs)]
    kept = build_dir / PYTHON_FACTS
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        data = json.loads(kept.read_bytes())
        if data["key"] == key and all(isinstance(v, str) for v in data["facts"].values()):
            return dict(data["facts"])
    out = json.loads(subprocess.run([str(python), "-c", _FACTS_CODE], capture_output=True,
                                    text=True, check=True).stdout)
    facts = {k: str(out[k] or "") for k in ("include", "purelib", "ext_suffix", "numpy_include")}
    with contextlib.suppress(OSError):
        build_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(kept, json.dumps({"key": key, "facts": facts}), durable=False)
    return facts


def pytorch_defines(ctx: BuildContext, opts: PyTorchOptions, env: dict[str, str],
                    frontend: SkbuildConfig | None, py: dict[str, str],
                    linked_source: bool = False) -> dict[str, str]:
    """The -D list PyTorch's driver would pass, then the recipe's explicit defines.
    setup.py (frontend None): the recipe's env (BUILD_*/USE_*/CMAKE_*), then what setup.py
    hard-codes. scikit-build-core: its own cache entries and setup.py's hard-codes as
    defaults, then the tree's cmake.define, then the recipe's env; the variant's build type
    either way. linked_source: the tree is configured through <build tree>/source, a link
    (its prefix maps come after the source's, as in cmake_steps.configure)."""
    defines: dict[str, str] = {}
    if frontend is not None:
        defines.update(skbuild_cache(ctx, opts, py, frontend))
    else:
        defines.update(defines_from_env(env))
    defines.update({
        "BUILD_PYTHON": "True",
        "BUILD_TEST": "True" if env_flag(env, "BUILD_TEST") else "False",
        "USE_NUMPY": ("True" if py["numpy_include"] and env.get("USE_NUMPY", "1").upper() not in FALSE_FLAGS
                      else "False"),
        "PYTHON_EXECUTABLE": str(ctx.toolchain.python),
        "PYTHON_INCLUDE_DIR": py["include"],
        "TORCH_BUILD_VERSION": torch_version(ctx, opts),
        "CMAKE_PREFIX_PATH": ";".join(p for p in (py["purelib"], env.get("CMAKE_PREFIX_PATH")) if p),
    })
    if frontend is not None:
        defines.update(frontend.defines)
        defines.update(defines_from_env(env))
    defines["CMAKE_BUILD_TYPE"] = build_type_from_env(env)
    if py["numpy_include"]:
        defines["NUMPY_INCLUDE_DIR"] = py["numpy_include"]
    link = source_link_flags(ctx.build_dir / SOURCE_COPY, ctx.logical_source) if linked_source else []
    flags = " ".join([*ctx.prefix_map_flags(), *ctx.split_dwarf_flags(), *link,
                      *ctx.plan.variant.cflags])
    defines["CMAKE_C_FLAGS"] = " ".join(x for x in (flags, env.get("CFLAGS", "")) if x)
    defines["CMAKE_CXX_FLAGS"] = " ".join(
        x for x in (flags, env.get("CXXFLAGS", env.get("CFLAGS", ""))) if x)
    defines.update(linker_defines(ctx, env))
    if env_flag(env, "USE_CUDA"):
        defines.update(cuda_defines(ctx, [*ctx.prefix_map_flags(), *link], defines["CMAKE_BUILD_TYPE"]))
    defines.update({k: define_value(v) for k, v in ctx.plan.variant.defines.items()})
    return defines


# Device debug info per build type (nvcc's own, for the device code; the host code gets the
# variant's -g through -Xcompiler): line tables for RelWithDebInfo (what PyTorch's DEBUG_CUDA
# adds), full device debug info for Debug (CUDA_DEVICE_DEBUG's -G: unoptimized device code).
DEVICE_DEBUG = {"RelWithDebInfo": ["-lineinfo"], "Debug": ["-G"]}
# ccache leaves these out of the hash (compile_cache/kind.py's CCACHE_IGNOREOPTIONS): they name
# the paths that differ between checkouts and build trees.
CUDA_PREFIX_MAPS = "-Xcompiler=-ffile-prefix-map="


def cuda_defines(ctx: BuildContext, maps: list[str], build_type: str) -> dict[str, str]:
    """A CUDA build against the lock's toolkit (CMAKE_CUDA_COMPILER and CUDAToolkit_ROOT come
    from cmake_steps.configure_args): the toolchain's g++ as nvcc's host compiler, NVTX 3 from
    the toolkit's headers (the tree's third_party/NVTX may be empty), and CMAKE_CUDA_FLAGS:
    the prefix maps and the variant's cflags handed to the host compiler, the device debug flag
    of the build type."""
    flags = [CUDA_PREFIX_MAPS + ",-ffile-prefix-map=".join(m.removeprefix("-ffile-prefix-map=")
                                                          for m in maps)] if maps else []
    if ctx.plan.variant.cflags:
        flags.append("-Xcompiler=" + ",".join(ctx.plan.variant.cflags))
    flags += DEVICE_DEBUG.get(build_type, [])
    out = {"CMAKE_CUDA_HOST_COMPILER": str(ctx.toolchain.cxx), "CMAKE_CUDA_FLAGS": " ".join(flags)}
    if ctx.toolchain.cuda_root is not None:
        out["nvtx3_dir"] = str(ctx.toolchain.cuda_root / "include")
    return out
