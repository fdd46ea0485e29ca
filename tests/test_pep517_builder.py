"""build.system = "pep517" end to end: the bundled scikit-build-core project built by pip with
the locked backend (no isolation, no index), unpacked into the prefix; variants become
cmake.build-type."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_setuptools_builder import Env, assert_bad_input

SO = "prefix/python/skbext/_core.cpython-311-x86_64-linux-gnu.so"


@pytest.fixture(scope="module")
def env(tmp_path_factory, session_toolchain) -> Env:
    return Env(tmp_path_factory.mktemp("pep517"), session_toolchain)


@pytest.mark.parametrize("variant,build_type,debug", [("relwithdebinfo", "RelWithDebInfo", True),
                                                      ("release", "Release", False),
                                                      ("debug", "Debug", True)])
def test_variant_becomes_the_backends_build_type(env, variant, build_type, debug):
    res = env.build("skbext", variant)
    assert res.returncode == 0, res.output
    art = env.artifact("skbext", variant)
    assert f"CMAKE_BUILD_TYPE:STRING={build_type}" in (art / "meta" / "CMakeCache.txt").read_text()
    assert (art / "meta" / "compile_commands.json").is_file()
    log = (art / "meta" / "build.log").read_text()
    assert f"--config-settings=cmake.build-type={build_type}" in log
    report = json.loads((art / "meta" / "verify.json").read_text())
    assert report["ok"], report["findings"]
    assert report["files"][SO]["debug_info"] is debug
    assert (art / "prefix" / "python" / "skbext-0.1.dist-info" / "METADATA").is_file()
    assert not (env.project / "recipes" / "skbext" / "build").exists()


def test_import_and_call_after_switch(env):
    assert env.build("skbext").returncode == 0
    sw = env.doit("switch", "recipe=skbext")
    assert sw.returncode == 0, sw.output
    assert env.doit("verify", "recipe=skbext").returncode == 0
    out = env.python("import skbext; print(skbext.triple(14))")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "42"


def write_pep517(project: Path, name: str, pyproject: str, uses: str | None) -> None:
    uses_line = f"uses = {uses}\n" if uses is not None else ""
    (project / "recipes" / f"{name}.toml").write_text(
        f'[source]\nkind = "path"\npath = "{name}"\n\n[build]\nsystem = "pep517"\n{uses_line}\n'
        '[variants.relwithdebinfo]\nbuild_type = "RelWithDebInfo"\n')
    (project / "recipes" / name).mkdir(exist_ok=True)
    (project / "recipes" / name / "pyproject.toml").write_text(pyproject)


USES = '["python", "compiler:cc", "compiler:cxx", "pypi:cmake", "pypi:ninja", "pypi:scikit-build-core"]'


def test_unknown_backend_is_bad_input(env):
    write_pep517(env.project, "flitty", '[build-system]\nrequires = ["flit_core"]\n'
                 'build-backend = "flit_core.buildapi"\n', USES)
    res = env.build("flitty")
    assert_bad_input(env, res, "recipes/flitty.toml", "flit_core.buildapi", "build.system")
    assert env.artifact("flitty") is None


def test_unlocked_build_requirement_is_bad_input(env):
    write_pep517(env.project, "needsy", '[build-system]\nrequires = ["scikit-build-core", '
                 '"nanobind"]\nbuild-backend = "scikit_build_core.build"\n', USES)
    res = env.build("needsy")
    assert_bad_input(env, res, "recipes/needsy.toml", "nanobind", "doit lock")


def test_pep517_without_uses_is_bad_input(env):
    write_pep517(env.project, "nouses", '[build-system]\nrequires = ["scikit-build-core"]\n'
                 'build-backend = "scikit_build_core.build"\n', None)
    res = env.build("nouses")
    assert_bad_input(env, res, "recipes/nouses.toml", "build.uses", "pep517")
