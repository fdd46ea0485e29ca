"""`doit verify` of a partial (targets=) build (issue 33): `id=<prefix>` prints that build's
own id (not the whole tree's), and recipe=/variant= alone, when only the partial build is in
the store, say which targets= it was built with. On a tiny real CMake project."""
from __future__ import annotations

import json

from conftest import copy_project, make_store, run_doit

CMAKE = ("cmake_minimum_required(VERSION 3.18)\nproject(tiny C)\n"
         "add_library(tiny SHARED tiny.c)\nadd_library(other SHARED other.c)\n"
         "install(TARGETS tiny other LIBRARY DESTINATION lib)\n")


def test_verify_of_a_partial_build_names_it_and_says_its_targets(tmp_path, session_toolchain):
    project = copy_project(tmp_path / "project")
    src = project / "recipes" / "parts"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(CMAKE)
    (src / "tiny.c").write_text("int tiny(void) { return 1; }\n")
    (src / "other.c").write_text("int other(void) { return 2; }\n")
    (project / "recipes" / "parts.toml").write_text(
        '[source]\nkind = "path"\npath = "parts"\n\n[build]\nsystem = "cmake"\n\n'
        '[variants.release]\nbuild_type = "Release"\n')
    store = make_store(tmp_path / "store", session_toolchain)
    common = ["recipe=parts", "variant=release", f"store={store}"]
    res = run_doit(project, "build", *common, "targets=tiny", "substitute=0", "format=json")
    assert res.returncode == 0, res.output[-3000:]
    built = json.loads(res.stdout.strip().splitlines()[-1])["id"]
    res = run_doit(project, "verify", f"id={built[:8]}", f"store={store}")
    assert res.returncode == 0, res.output[-3000:]
    assert f"verify {built}-parts-release" in res.output, res.output
    res = run_doit(project, "verify", *common)
    assert res.returncode == 2, res.output
    assert f"targets=tiny ({built[:12]})" in res.output and "add that targets=" in res.output, \
        res.output
