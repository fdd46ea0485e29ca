"""The PyTorch recipe's rules that need no build: setup.py's env facts, driver detection,
option validation, and that every locked system package is checked at build time."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.builders import pytorch_defines
from orchestrator.builders.pytorch_defines import build_type_from_env, defines_from_env
from orchestrator.errors import UserError
from orchestrator.lock.files import load_lock
from orchestrator.model.cuda_arch import cmake_architectures
from orchestrator.model.lock import Lock, SystemPackageEntry
from orchestrator.model.recipe import load_recipe
from orchestrator.sources.tree_version import detect_driver
from orchestrator.toolchain.machine_check import check_machine

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("env,expected", [
    ({}, "Release"),
    ({"DEBUG": "1"}, "Debug"),
    ({"REL_WITH_DEB_INFO": "ON"}, "RelWithDebInfo"),
    ({"DEBUG": "1", "REL_WITH_DEB_INFO": "1"}, "Debug"),
    ({"DEBUG": "1", "CMAKE_BUILD_TYPE": "Release"}, "Release"),  # CMAKE_BUILD_TYPE wins
    ({"DEBUG": "0", "REL_WITH_DEB_INFO": "yes"}, "RelWithDebInfo"),
])
def test_build_type_follows_setup_py(env, expected):
    assert build_type_from_env(env) == expected


def test_env_to_defines_follows_setup_py():
    env = {"USE_CUDA": "0", "BUILD_TEST": "0", "CMAKE_PREFIX_PATH": "/x", "TORCH_CUDA_ARCH_LIST": "8.0",
           "MAX_JOBS": "2", "_GLIBCXX_USE_CXX11_ABI": "1", "BLAS": "OpenBLAS", "PATH": "/usr/bin",
           "CFLAGS": "-O1", "ONNX_NAMESPACE": "onnx_torch", "PYTORCH_BUILD_VERSION": "9"}
    assert defines_from_env(env) == {
        "USE_CUDA": "0", "BUILD_TEST": "0", "CMAKE_PREFIX_PATH": "/x",
        "GLIBCXX_USE_CXX11_ABI": "1", "BLAS": "OpenBLAS", "ONNX_NAMESPACE": "onnx_torch"}


def test_install_prefix_belongs_to_the_driver():
    with pytest.raises(UserError, match="CMAKE_INSTALL_PREFIX is set by the PyTorch driver"):
        defines_from_env({"CMAKE_INSTALL_PREFIX": "/opt"})


def test_driver_detection(tmp_path):
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "setup.py").write_text("")
    (legacy / "pyproject.toml").write_text(
        '[build-system]\nbuild-backend = "setuptools.build_meta:__legacy__"\n')
    assert detect_driver(legacy) == "setuptools"
    modern = tmp_path / "modern"
    modern.mkdir()
    (modern / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["scikit-build-core"]\nbuild-backend = "scikit_build_core.build"\n'
        '[tool.scikit-build.cmake.define]\nBUILD_PYTHON = true\n')
    assert detect_driver(modern) == "scikit-build-core"
    with pytest.raises(UserError, match="neither setup.py nor a scikit-build-core"):
        detect_driver(tmp_path)


def write_recipe(tmp_path: Path, build_pytorch: str) -> Path:
    recipes = tmp_path / "recipes"
    recipes.mkdir(exist_ok=True)
    text = (REPO / "recipes" / "pytorch.toml").read_text()
    head, _, rest = text.partition("[build.pytorch]\n")
    _, _, tail = rest.partition("\n\n")
    (recipes / "pytorch.toml").write_text(f"{head}[build.pytorch]\n{build_pytorch}\n\n{tail}")
    return recipes


def test_cuda_without_arch_list_is_refused_with_a_clear_line(tmp_path):
    recipes = write_recipe(tmp_path, "cuda = true")
    with pytest.raises(UserError) as e:
        load_recipe(recipes, "pytorch")
    msg = str(e.value)
    assert "recipes/pytorch.toml" in msg and "cuda_arch_list" in msg and "\n" not in msg


def test_cuda_arch_list_is_validated_and_normalised(tmp_path):
    recipe = load_recipe(write_recipe(tmp_path, 'cuda = true\ncuda_arch_list = "8.0 9.0+PTX"'), "pytorch")
    assert recipe.build.pytorch.cuda_arch_list == "8.0;9.0+PTX"
    with pytest.raises(UserError, match="compute capabilities"):
        load_recipe(write_recipe(tmp_path, 'cuda = true\ncuda_arch_list = "sm_90"'), "pytorch")


def test_cuda_arch_list_in_cmake_form_for_the_checks():
    """What plan's nvcc check and verify's fatbin check compare: X.Y the cubin only, +PTX both."""
    assert cmake_architectures("8.0;9.0+PTX") == "80-real;90"
    assert cmake_architectures("9.0") == "90-real"
    assert cmake_architectures("Hopper") == "Hopper"  # not ours to read: the check names it


def test_the_recipe_checks_every_locked_system_package():
    recipe = load_recipe(REPO / "recipes", "pytorch")
    lock = load_lock(REPO / "locks", recipe.lock)
    syspkgs = {k for k, e in lock.entries.items() if isinstance(e, SystemPackageEntry)}
    assert syspkgs and syspkgs <= set(recipe.build.uses or [])
    assert {"syspkg:libsleef-dev", "syspkg:libcpuinfo-dev", "syspkg:libonnx-dev"} <= syspkgs


def test_system_package_drift_names_the_package():
    lock = load_lock(REPO / "locks", "pytorch")
    data = json.loads(lock.model_dump_json())
    data["entries"]["syspkg:libsleef-dev"]["version"] = "0.0-drifted"
    drifted = Lock.model_validate(data)
    check_machine(lock, ["syspkg:libsleef-dev"])  # the real machine matches the lock
    with pytest.raises(UserError, match=r"syspkg:libsleef-dev \(Debian package libsleef-dev\) "
                                        r"version is .*the lock says 0.0-drifted"):
        check_machine(drifted, ["syspkg:libsleef-dev"])


def test_patches_of_the_recipe_exist_and_are_ordered():
    recipe = load_recipe(REPO / "recipes", "pytorch")
    names = [p.rsplit("/", 1)[1] for p in recipe.source.patches]
    assert names == sorted(names) and names[:2] == ["0001-drop-foxi.patch",
                                                    "0002-fmt9-format-to.patch"]
    assert all((REPO / "recipes" / p).is_file() for p in recipe.source.patches)
    # Every patch file shipped is applied (none forgotten in the recipe).
    shipped = sorted(p.name for p in (REPO / "recipes/pytorch/patches").glob("*.patch"))
    assert names == shipped
    assert [o.path for o in recipe.source.overlays] == ["third_party/fmt", "third_party/kineto",
                                                       "third_party/pocketfft"]
    assert {o.archive_dir.split("/")[1].split("-")[0] for o in recipe.source.overlays
            if o.archive_dir} == {"kineto", "pocketfft"}
    assert shutil.which("patch") and shutil.which("tar")


def test_python_facts_are_asked_once_per_build_tree_and_interpreter(tmp_path, monkeypatch):
    """The interpreter's include dir, extension suffix and numpy include are asked once and
    kept in the build tree under the stat of the interpreter and its site-packages: the
    next incremental build runs no interpreter, and a package installed in it asks again."""
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    python, tree = venv / "bin" / "python", tmp_path / "build"
    real_run, runs = subprocess.run, []

    def counting(*args, **kwargs):
        runs.append(args[0])
        return real_run(*args, **kwargs)

    monkeypatch.setattr(pytorch_defines.subprocess, "run", counting)
    facts = pytorch_defines.python_facts(python, tree)
    assert Path(facts["include"], "Python.h").is_file()
    assert facts["ext_suffix"].endswith(".so") and facts["numpy_include"] == ""  # no numpy
    assert facts["purelib"].startswith(str(venv)) and len(runs) == 1
    assert pytorch_defines.python_facts(python, tree) == facts and len(runs) == 1  # kept
    # A package installed into the venv (its site-packages changes): asked again.
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "numpy").mkdir()
    (site / "numpy" / "__init__.py").write_text("def get_include():\n    return '/np/inc'\n")
    assert pytorch_defines.python_facts(python, tree)["numpy_include"] == "/np/inc"
    assert len(runs) == 2
    # A kept file of another shape is not believed.
    (tree / pytorch_defines.PYTHON_FACTS).write_text('{"key": [], "facts": {"include": 1}}')
    assert pytorch_defines.python_facts(python, tree)["numpy_include"] == "/np/inc"
    assert len(runs) == 3
