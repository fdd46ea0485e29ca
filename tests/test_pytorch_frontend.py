"""PyTorch 2.14's front-end: a tree built through pyproject.toml's [tool.scikit-build] (no
setup.py) is configured as scikit-build-core would configure it, end to end on a 2.14-shaped
miniature (recipes/pytorch/minitorch214) with real cmake, ninja and gcc; a tree whose
front-end the builder cannot read, and a compiler too old for the C++ standard a tree asks
for, are one line, exit 2, before anything is configured or compiled.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from conftest import REPO, copy_project, run_doit

from orchestrator.builders.cxx_standard import PROBE_KEPT, check_standard, reported_cplusplus, required_standard
from orchestrator.errors import UserError
from orchestrator.sources.skbuild_settings import SKBUILD_VERSION, apply_overrides, define_text, read_skbuild

MINI = REPO / "recipes" / "pytorch" / "minitorch214"
RECIPE = """
lock = "pytorch"
[source]
kind = "archive"
file = "minitorch214-2.14.0.tar.gz"
sha256 = "{sha}"
patches = ["minitorch214/patches/0001-readme.patch"]
patch_checkouts = true
[build]
system = "pytorch"
[build.pytorch]
version = "2.14.0"
system_libs = true
[variants.relwithdebinfo]
build_type = "RelWithDebInfo"
# What the pinned lldb-14 needs to read GCC 12's debug info (verify checks it).
cflags = ["-gdwarf-4", "-fno-reorder-blocks-and-partition"]
env = {{ REL_WITH_DEB_INFO = "1" }}
"""


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    root = tmp_path_factory.mktemp("minitorch214")
    archives = root / "archives"
    archives.mkdir()
    tarball = archives / "minitorch214-2.14.0.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(MINI, arcname="minitorch214-2.14.0",
                filter=lambda ti: None if "__pycache__" in ti.name else ti)
    project = copy_project(root / "project")
    sha = hashlib.sha256(tarball.read_bytes()).hexdigest()
    (project / "recipes" / "minitorch214.toml").write_text(RECIPE.format(sha=sha))
    # A patch, so `source=PATH` builds a patched copy of the checkout in the store's sources/
    # (as recipes/pytorch2.toml does): a refusal must come before that copy is made.
    (project / "recipes" / "minitorch214" / "patches").mkdir(parents=True)
    readme = (MINI / "README.md").read_text().splitlines(keepends=True)
    (project / "recipes" / "minitorch214" / "patches" / "0001-readme.patch").write_text("".join(
        difflib.unified_diff(readme, [*readme, "Patched by the recipe.\n"], "a/README.md",
                             "b/README.md")))
    return {"root": root, "project": project, "store": root / "store",
            "env": {"ORCH_ARCHIVES": str(archives)}}


def doit(mini, *args: str):
    return run_doit(mini["project"], *args, "recipe=minitorch214", f"store={mini['store']}",
                    "substitute=0", env=mini["env"])


def cache_entries(text: str) -> dict[str, str]:
    return dict(m.groups() for m in re.finditer(r"^([A-Za-z0-9_]+):[A-Z]+=(.*)$", text, re.M))


def test_scikit_build_core_tree_built_end_to_end(mini):
    res = doit(mini, "build", "variant=relwithdebinfo", "format=json")
    assert res.returncode == 0, res.output[-3000:]
    art = Path(json.loads(res.stdout.strip().splitlines()[-1])["path"])
    info = json.loads((art / "meta/pytorch.json").read_text())
    assert info["driver"] == "scikit-build-core" and info["cxx_standard"] == 20
    front = info["frontend"]
    # [[overrides]] matched against the recipe's env: REL_WITH_DEB_INFO (the variant's env)
    # and USE_SYSTEM_LIBS (system_libs = true); DEBUG and BUILD_DOCS are unset.
    assert front["overrides"] == ["#2 (env.REL_WITH_DEB_INFO)", "#3 (env.USE_SYSTEM_LIBS)"]
    assert front["table_build_type"] == "RelWithDebInfo" and front["source_dir"] == "."
    assert front["args"] == ["-DTORCH_FRONTEND_ARGS=from-cmake-args"]
    assert front["minimum_version"] == "0.11"  # minimum-version = "build-system.requires"
    cache = cache_entries((art / "meta/CMakeCache.txt").read_text())
    # cmake.define in scikit-build-core's spelling (TRUE/FALSE, ;-lists, {env, default}),
    # the appended override's define, cmake.args, scikit-build-core's own entries.
    assert cache["BUILD_PYTHON"] == "TRUE" and cache["USE_PRECOMPILED_HEADERS"] == "FALSE"
    assert cache["TORCH_EXTRA_LIBS"] == "c10;torch_python" and cache["USE_MIMALLOC"] == "FALSE"
    assert cache["USE_SYSTEM_SLEEF"] == "TRUE" and "BUILD_DOCS_FROM_OVERRIDE" not in cache
    assert cache["TORCH_FRONTEND_ARGS"] == "from-cmake-args"
    assert cache["SKBUILD"] == "2" and cache["SKBUILD_PROJECT_NAME"] == "torch"
    assert cache["SKBUILD_PROJECT_VERSION"] == "2.14.0" and cache["SKBUILD_STATE"] == "editable"
    assert cache["CMAKE_BUILD_TYPE"] == "RelWithDebInfo" and cache["CMAKE_CXX_STANDARD"] == "20"
    # The built torch imports and reports the build type and C++20's __cplusplus.
    py = art / "prefix" / "python"
    out = subprocess.run([info["defines"]["PYTHON_EXECUTABLE"], "-c",
                          "import torch; print(torch.__config__.show())"],
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(py)},
                         capture_output=True, text=True, cwd="/")
    assert out.returncode == 0, out.stderr
    assert "BUILD_TYPE=RelWithDebInfo CXX=202002L" in out.stdout


def test_cmake_source_dir_is_the_entry_point_of_a_checkout_build(mini):
    """cmake.source-dir names another CMakeLists.txt (here one that adds the root's as a
    subdirectory): CMake runs on it, for a `source=PATH` checkout too."""
    def edit(t: Path) -> None:
        replace(t / "pyproject.toml", 'cmake.source-dir = "."', 'cmake.source-dir = "tools/entry"')
        (t / "tools" / "entry").mkdir(parents=True)
        (t / "tools" / "entry" / "CMakeLists.txt").write_text(
            "cmake_minimum_required(VERSION 3.27 FATAL_ERROR)\nproject(TorchEntry CXX C)\n"
            "set(TORCH_ENTRY_POINT ON CACHE BOOL \"\")\n"
            "add_subdirectory(${CMAKE_CURRENT_SOURCE_DIR}/../.. torch)\n")
    tree = tree_with(mini, "entry", edit)
    res = doit(mini, "build", "variant=relwithdebinfo", f"source={tree}", "format=json")
    assert res.returncode == 0, res.output[-3000:]
    art = Path(json.loads(res.stdout.strip().splitlines()[-1])["path"])
    info = json.loads((art / "meta/pytorch.json").read_text())
    assert info["frontend"]["source_dir"] == "tools/entry"
    cache = cache_entries((art / "meta/CMakeCache.txt").read_text())
    assert cache["TORCH_ENTRY_POINT"] == "ON" and cache["CMAKE_HOME_DIRECTORY"].endswith("/tools/entry")
    assert (art / "prefix/lib/libtorch_python.so").is_file()


def refused(mini, tree: Path, *must: str, copied: bool = False) -> str:
    """`doit build source=tree`: one line, exit 2, no traceback, nothing configured or stored;
    nothing copied either, unless `copied` (a refusal that needs the locked toolchain comes
    after the recipe's patched copy of the checkout is made in sources/)."""
    store_before = listing(mini["store"])
    tree_before = listing(tree)
    res = doit(mini, "build", "variant=relwithdebinfo", f"source={tree}")
    assert res.returncode == 2, res.output[-2000:]
    assert "Traceback" not in res.output, res.output[-2000:]
    errors = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, res.output[-2000:]
    for text in must:
        assert text in errors[0], errors[0]
    assert listing(tree) == tree_before  # the checkout is not written
    # Nothing copied, configured or stored: no sources/, build/, store/ or tmp/ entry (the
    # toolchain, made on the first build, and the planner's caches may appear).
    made = {p[0] for p in listing(mini["store"]) - store_before}
    kept = ("build/", "store/", "tmp/") if copied else ("sources/", "build/", "store/", "tmp/")
    assert not any(p.startswith(kept) for p in made), made
    return errors[0]


def listing(root: Path) -> set[tuple[str, int]]:
    """Every file under root with its mtime (ns): what a refusal must leave as it was."""
    return {(str(p.relative_to(root)), p.lstat().st_mtime_ns) for p in root.rglob("*")
            if not p.is_dir()} if root.is_dir() else set()


def tree_with(mini, name: str, edit) -> Path:
    tree = mini["root"] / "trees" / name
    shutil.copytree(MINI, tree, ignore=shutil.ignore_patterns("__pycache__"))
    edit(tree)
    return tree


def replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_unknown_build_backend_is_one_line(mini):
    tree = tree_with(mini, "meson", lambda t: replace(
        t / "pyproject.toml", 'build-backend = "scikit_build_core.build"',
        'build-backend = "mesonpy"'))
    refused(mini, tree, "build-backend 'mesonpy'", "scikit_build_core.build")


def test_minimum_version_beyond_the_lock_is_one_line(mini):
    tree = tree_with(mini, "minimum", lambda t: replace(
        t / "pyproject.toml", 'minimum-version = "build-system.requires"',
        'minimum-version = "1.5"'))
    refused(mini, tree, 'minimum-version = "1.5"', "scikit-build-core 1.1.0")


def test_required_scikit_build_core_beyond_the_lock_is_one_line(mini):
    tree = tree_with(mini, "requires", lambda t: replace(
        t / "pyproject.toml", '"scikit-build-core>=0.11"', '"scikit-build-core>=2.0"'))
    refused(mini, tree, "scikit-build-core>=2.0", "scikit-build-core 1.1.0")


def test_missing_tool_scikit_build_table_is_one_line(mini):
    """The CMake entry point is in cmake/entry, which only [tool.scikit-build] could name."""
    def edit(t: Path) -> None:
        text = (t / "pyproject.toml").read_text()
        (t / "pyproject.toml").write_text(text[:text.index("[tool.scikit-build]")])
        (t / "cmake" / "entry").mkdir(parents=True)
        (t / "CMakeLists.txt").rename(t / "cmake" / "entry" / "CMakeLists.txt")
    refused(mini, tree_with(mini, "notable", edit), "no [tool.scikit-build] table",
            "has no CMakeLists.txt")


def test_compiler_too_old_for_the_tree_is_one_line_before_any_compile(mini):
    """The machine's newest g++ (12) cannot do C++23 (it reports 202100L): the same check
    that refuses a pre-GCC-11 compiler for a 2.13+ C++20 tree."""
    tree = tree_with(mini, "cxx23", lambda t: replace(
        t / "CMakeLists.txt", "set(CMAKE_CXX_STANDARD\n    20", "set(CMAKE_CXX_STANDARD\n    23"))
    refused(mini, tree, "CMAKE_CXX_STANDARD 23", "__cplusplus 202100L", "pin a newer C++ compiler",
            copied=True)


# -- the reader's semantics, without a build ----------------------------------------------
def test_overrides_replace_unless_inherited_and_any_not_conditions():
    table = {"cmake": {"define": {"A": "1"}, "args": ["-Dx"]}, "overrides": [
        {"if": {"env": {"ONE": True}}, "cmake": {"define": {"B": "2"}}},
        {"if": {"any": {"env": {"NOPE": True, "TWO": "^t.o$"}}},
         "inherit": {"cmake": {"args": "prepend"}}, "cmake": {"args": ["-Dy"]}},
        {"if": {"not": {"env": {"ONE": True}}}, "cmake": {"define": {"C": "3"}}},
    ]}
    matched = apply_overrides(table, {"ONE": "yes", "TWO": "two"}, "1.1.0", "pyproject.toml")
    assert matched == ["#1 (env.ONE)", "#2 (env.TWO)"]
    assert table["cmake"] == {"define": {"B": "2"}, "args": ["-Dy", "-Dx"]}
    with pytest.raises(UserError, match="if.failed is a condition"):
        apply_overrides({"overrides": [{"if": {"failed": True}, "x": 1}]}, {}, "1.1.0", "p")
    assert define_text("L", ["a;b", "c"], {}, "p") == r"a\;b;c"
    assert define_text("E", {"env": "V", "default": False}, {"V": "on"}, "p") == "TRUE"
    assert define_text("E", {"env": "V"}, {}, "p") is None


def test_source_dir_and_cxx_standard_are_read_from_the_tree(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "CMakeLists.txt").write_text(
        "# set(CMAKE_CXX_STANDARD 26)\nset( CMAKE_CXX_STANDARD\n  20\n  CACHE STRING \"x\")\n")
    data = {"build-system": {"requires": ["scikit-build-core"]},
            "tool": {"scikit-build": {"cmake": {"source-dir": "sub"}}}}
    assert read_skbuild(tmp_path, data, {}).source_subdir == "sub"
    assert required_standard(tmp_path / "sub" / "CMakeLists.txt") == 20
    assert reported_cplusplus(Path(shutil.which("g++")), 20) == 202002
    assert reported_cplusplus(Path(shutil.which("g++")), 26) is None
    with pytest.raises(UserError, match="outside the tree"):
        read_skbuild(tmp_path, {"tool": {"scikit-build": {"cmake": {"source-dir": ".."}}}}, {})


def test_a_passing_probe_is_kept_in_the_build_tree_and_a_refusal_writes_nothing(tmp_path):
    gxx = Path(shutil.which("g++"))
    cm = tmp_path / "CMakeLists.txt"
    cm.write_text("set(CMAKE_CXX_STANDARD 20 CACHE STRING \"\")\n")
    build = tmp_path / "build"
    assert check_standard(gxx, cm, "r", build) == 20 and not build.exists()  # not created
    build.mkdir()
    assert check_standard(gxx, cm, "r", build) == 20
    kept = json.loads((build / PROBE_KEPT).read_text())
    assert kept[0] == str(gxx) and kept[2] == 20
    cm.write_text("set(CMAKE_CXX_STANDARD 23)\n")
    with pytest.raises(UserError, match="reports __cplusplus 202100L"):
        check_standard(gxx, cm, "r", build)
    assert json.loads((build / PROBE_KEPT).read_text()) == kept


def test_the_reader_follows_the_toolchain_locks_scikit_build_core():
    """The version [tool.scikit-build] is read as is the one the toolchain lock pins (torch
    2.14.1's own wheel says `Generator: scikit-build-core 1.1.0`)."""
    lock = json.loads((REPO / "locks" / "toolchain.lock.json").read_text())
    [entry] = [e for k, e in lock["entries"].items() if k == "pypi:scikit-build-core"]
    assert entry["version"] == SKBUILD_VERSION
