"""setuptools (torch.utils.cpp_extension, ninja) and PEP 517 (scikit-build-core) builds go
through the compile cache (issue 33): the build summary counts their compiles, a rebuild after
one edit compiles one file (the source copy and setuptools' build/ persist), and no launcher
the build did not choose is on its PATH."""
from __future__ import annotations

import re

import pytest
from test_setuptools_builder import Env

SUMMARY = re.compile(r"compile cache: (\d+) hit\(s\), (\d+) miss\(es\)")
# Two small sources of a CppExtension, neither including torch's headers: cheap compiles.
MAIN_CPP = """#include <Python.h>
int ccext_other();
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&module); }
"""
SETUP_PY = """import shutil
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

print("ccext: sccache on PATH:", shutil.which("sccache"), flush=True)
setup(name="ccext", version="0.1", packages=["ccext"],
      ext_modules=[CppExtension("ccext._C", ["csrc/main.cpp", "csrc/other.cpp"])],
      cmdclass={"build_ext": BuildExtension})
"""
RECIPE = """[source]
kind = "path"
path = "ccext"

[build]
system = "setuptools"
uses = ["python", "compiler:cc", "compiler:cxx", "pypi:setuptools", "pypi:torch", "pypi:ninja"]

[variants.relwithdebinfo]
build_type = "RelWithDebInfo"
"""


def hits_misses(output: str) -> tuple[int, int]:
    m = SUMMARY.search(output)
    assert m, output
    return int(m[1]), int(m[2])


@pytest.fixture(scope="module")
def env(tmp_path_factory, session_toolchain) -> Env:
    e = Env(tmp_path_factory.mktemp("wheelcache"), session_toolchain)
    src = e.project / "recipes" / "ccext"
    (src / "csrc").mkdir(parents=True)
    (src / "ccext").mkdir()
    (src / "ccext" / "__init__.py").write_text("from . import _C\n")
    (src / "setup.py").write_text(SETUP_PY)
    (src / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=64", "torch", '
                                        '"ninja"]\nbuild-backend = "setuptools.build_meta"\n')
    (src / "csrc" / "main.cpp").write_text(MAIN_CPP)
    (src / "csrc" / "other.cpp").write_text("int ccext_other() { return 1; }\n")
    (e.project / "recipes" / "ccext.toml").write_text(RECIPE)
    return e


def test_setuptools_compiles_through_ccache_and_a_rebuild_compiles_the_edited_file(env):
    res = env.build("ccext")
    assert res.returncode == 0, res.output
    assert hits_misses(res.output) == (0, 2)  # both compiles went through ccache
    log = (env.artifact("ccext") / "meta" / "build.log").read_text()
    assert "ccext: sccache on PATH: None" in log  # compile_cache=ccache: sccache hidden
    assert "/.orch-cc/ccache/" in log  # cpp_extension's ninja ran the wrapper
    other = env.project / "recipes" / "ccext" / "csrc" / "other.cpp"
    other.write_text("int ccext_other() { return 2; }\n")
    res = env.build("ccext")
    assert res.returncode == 0, res.output
    assert hits_misses(res.output) == (0, 1)  # one edit: one compile, main.cpp's .o kept


def test_scikit_build_core_compiles_through_ccache(env):
    res = env.build("skbext")
    assert res.returncode == 0, res.output
    hits, misses = hits_misses(res.output)
    assert hits + misses > 0, res.output
    assert "CMAKE_CXX_COMPILER_LAUNCHER" in (env.artifact("skbext") / "meta" / "CMakeCache.txt").read_text()
