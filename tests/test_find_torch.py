"""find_package(Torch) unaided: a CMake recipe using pypi:torch gets the locked wheel's CMake
prefix from the builder; no absolute path reaches the derivation (the artifact id)."""
from __future__ import annotations

import json

import pytest
from test_setuptools_builder import Env


@pytest.fixture(scope="module")
def env(tmp_path_factory, session_toolchain) -> Env:
    return Env(tmp_path_factory.mktemp("findtorch"), session_toolchain)


def test_unmodified_find_package_torch_builds_and_verifies(env, session_toolchain):
    cml = (env.project / "recipes" / "findtorch" / "CMakeLists.txt").read_text()
    assert "find_package(Torch REQUIRED)" in cml and "CMAKE_PREFIX_PATH" not in cml
    res = env.build("findtorch")
    assert res.returncode == 0, res.output
    art = env.artifact("findtorch")
    cache = (art / "meta" / "CMakeCache.txt").read_text()
    [torch_dir] = [ln for ln in cache.splitlines() if ln.startswith("Torch_DIR:")]
    assert torch_dir.endswith("site-packages/torch/share/cmake/Torch"), torch_dir
    report = json.loads((art / "meta" / "verify.json").read_text())
    assert report["ok"], report["findings"]
    assert "libc10.so" in report["files"]["prefix/lib/libfindtorch.so"]["needed"]
    manifest = json.loads((art / "manifest.json").read_text())
    text = json.dumps(manifest["derivation"])
    assert "site-packages" not in text and str(session_toolchain) not in text
    assert str(env.store) not in text


def test_the_id_is_the_same_from_another_store_and_workspace(env, tmp_path, session_toolchain):
    other = Env(tmp_path / "other", session_toolchain)
    a = env.doit("plan", "recipe=findtorch", "format=json")
    b = other.doit("plan", "recipe=findtorch", "format=json")
    assert a.returncode == 0 and b.returncode == 0, a.output + b.output
    assert json.loads(a.stdout.strip().splitlines()[-1])["id"] == \
        json.loads(b.stdout.strip().splitlines()[-1])["id"]

