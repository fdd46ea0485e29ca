"""The IDE files follow switch and rollback (F5 builds and debugs the active artifact), use
${workspaceFolder} where VS Code takes it, `doit vscode` names what it wrote, and the presets
pass CMake only variables the project reads."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from orchestrator.ide.cmake_presets import used_cache_variables
from orchestrator.ide.jsonc import loads_jsonc
from orchestrator.ide.variables import resolve_variables


def build_task(project: Path) -> dict:
    tasks = json.loads((project / ".vscode/tasks.json").read_text())["tasks"]
    return {t["label"]: t for t in tasks}["orch: build"]


def test_ide_files_follow_switch_and_rollback(doit, project: Path) -> None:  # noqa: ANN001
    res = doit("vscode")
    assert res.returncode == 0, res.output
    for name in (".vscode/tasks.json", ".vscode/launch.json", ".vscode/settings.json"):
        assert f"  {name}" in res.stderr.splitlines(), res.stderr  # named, relative
    for v in ("release", "relwithdebinfo"):
        assert doit("switch", f"variant={v}").returncode == 0
    assert "variant=relwithdebinfo" in build_task(project)["args"]
    res = doit("rollback")
    assert res.returncode == 0, res.output
    task = build_task(project)
    assert "variant=release" in task["args"], task
    assert task["options"]["cwd"] == "${workspaceFolder}"
    assert any(a == "${workspaceFolder}/dodo.py" for a in task["args"]), task
    settings = json.loads((project / ".vscode/settings.json").read_text())
    assert settings["cmake.cmakePath"].startswith("${workspaceFolder}/.orch/toolchain/")
    assert Path(resolve_variables(settings["cmake.cmakePath"], project)).is_file()

    # the presets configure without "Manually-specified variables were not used"
    src = project / "recipes/demo"
    presets = loads_jsonc((src / "CMakePresets.json").read_text(), src / "CMakePresets.json")
    p = {x["name"]: x for x in presets["configurePresets"]}["orch-release"]
    assert "CMAKE_CUDA_COMPILER" not in p["cacheVariables"]
    out = subprocess.run([p["cmakeExecutable"], "--preset", "orch-release"], cwd=src,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "not used by the project" not in out.stdout + out.stderr, out.stderr


def test_used_cache_variables() -> None:
    cache = {"CMAKE_BUILD_TYPE": "Release", "CMAKE_CUDA_COMPILER": "/n/nvcc",
             "CMAKE_CXX_FLAGS": "-O2", "Python_EXECUTABLE": "/p", "DEMO_OPT": "ON"}
    assert used_cache_variables(cache, "project(d CXX)\noption(DEMO_OPT x)") == {
        "CMAKE_BUILD_TYPE": "Release", "CMAKE_CXX_FLAGS": "-O2", "DEMO_OPT": "ON"}
    both = "project(d CXX CUDA)\nfind_package(Python COMPONENTS Interpreter)"
    assert set(used_cache_variables(cache, both)) == set(cache) - {"DEMO_OPT"}
