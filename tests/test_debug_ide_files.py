"""`doit vscode` as files: the user's own entries survive (merge by name), a second run
writes nothing, a file it cannot merge is one line and exit 2 with nothing written, and the
CMake presets configure the demo with the toolchain's cmake without changing its identity."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import copy_project, make_store, run_doit

from orchestrator.ide.jsonc import loads_jsonc

USER_LAUNCH = """\
// my own launch.json, with comments and a trailing comma as VS Code allows
{
  "version": "0.2.0",
  "configurations": [
    {"name": "My tool", "type": "cppdbg", "request": "launch", "program": "/bin/true"},
    /* a configuration an older `doit vscode` wrote */
    {"name": "orch: stale", "type": "lldb-dap", "request": "launch", "program": "/bin/false"},
  ],
}
"""


@pytest.fixture(scope="module")
def ws(tmp_path_factory, session_toolchain) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("debug-files")
    root = copy_project(base / "checkout")
    store = make_store(base / "store", session_toolchain)
    res = run_doit(root, "switch", "variant=relwithdebinfo", "substitute=0", f"store={store}")
    assert res.returncode == 0, res.output
    vs = root / ".vscode"
    vs.mkdir()
    (vs / "launch.json").write_text(USER_LAUNCH)
    (vs / "settings.json").write_text('{"editor.tabSize": 3, "python.defaultInterpreterPath": "x"}')
    (root / ".lldbinit").write_text("settings set target.x86-disassembly-flavor intel\n")
    return root, store


def vscode(ws: tuple[Path, Path], *args: str) -> dict:
    root, store = ws
    res = run_doit(root, "vscode", "format=json", f"store={store}", *args)
    assert res.returncode == 0, res.output
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_merge_keeps_the_users_entries_and_replaces_ours(ws: tuple[Path, Path]) -> None:
    root, _ = ws
    vscode(ws)
    launch = json.loads((root / ".vscode/launch.json").read_text())
    names = [c["name"] for c in launch["configurations"]]
    assert names[0] == "My tool" and "orch: stale" not in names, names
    assert len(names) == len(set(names))
    by_name = {c["name"]: c for c in launch["configurations"]}
    assert by_name["My tool"]["program"] == "/bin/true"
    kinds = {(c["type"], c["request"]) for c in launch["configurations"]}
    assert {("lldb-dap", "launch"), ("cppdbg", "launch"), ("debugpy", "launch"),
            ("lldb-dap", "attach"), ("cppdbg", "attach")} <= kinds, kinds
    gdb = by_name["orch: Python + C++ (gdb)"]
    assert gdb["MIMode"] == "gdb" and gdb["sourceFileMap"] == {
        "/orch/src/demo": "${workspaceFolder}/recipes/demo"}
    # No debuggee environment sets LD_LIBRARY_PATH (as .orch/env.sh: it beats RUNPATH).
    assert "LD_LIBRARY_PATH" not in (root / ".vscode/launch.json").read_text()
    debug_env = {e.split("=", 1)[0]: e.split("=", 1)[1]
                 for e in by_name["orch: debug-env Python + C++ (lldb-14)"]["env"]}
    assert {k: debug_env[k] for k in ("CUDA_LAUNCH_BLOCKING", "TORCH_SHOW_CPP_STACKTRACES",
                                      "PYTHONFAULTHANDLER")} == dict.fromkeys(
        ("CUDA_LAUNCH_BLOCKING", "TORCH_SHOW_CPP_STACKTRACES", "PYTHONFAULTHANDLER"), "1")
    # Every preLaunchTask names a task that exists and builds the active variant.
    tasks = {t["label"]: t for t in json.loads((root / ".vscode/tasks.json").read_text())["tasks"]}
    for c in launch["configurations"]:
        if "preLaunchTask" in c:
            assert c["preLaunchTask"] in tasks, c
    assert tasks["orch: build"]["args"][-3:] == ["switch", "recipe=demo", "variant=relwithdebinfo"]
    settings = json.loads((root / ".vscode/settings.json").read_text())
    assert settings["editor.tabSize"] == 3
    assert settings["python.defaultInterpreterPath"] == \
        "${workspaceFolder}/.orch/toolchain/venv/bin/python"
    assert settings["C_Cpp.default.compileCommands"].endswith(
        ".orch/profile/meta/compile_commands.json")
    assert (root / ".orch/profile/meta/compile_commands.json").is_file()
    cpp = json.loads((root / ".vscode/c_cpp_properties.json").read_text())
    assert cpp["configurations"][0]["compileCommands"] == settings["C_Cpp.default.compileCommands"]
    lldbinit = (root / ".lldbinit").read_text()
    assert lldbinit.startswith("settings set target.x86-disassembly-flavor intel\n")
    assert 'settings set target.source-map "/orch/src/demo"' in lldbinit


def test_second_run_writes_nothing_and_the_debug_tools_run(ws: tuple[Path, Path]) -> None:
    root, _ = ws
    report = vscode(ws)
    assert report["written"] == [] and report["lldb_missing_libraries"] == [], report
    settings = json.loads((root / ".vscode/settings.json").read_text())
    version = subprocess.run([settings["lldb-dap.executable-path"], "--help"],
                             capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and "lldb-vscode" in version.stdout + version.stderr
    python = settings["python.defaultInterpreterPath"].replace("${workspaceFolder}", str(root))
    probe = subprocess.run([python, "-c", "import debugpy, sys; print(sys.prefix)"],
                           capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr
    assert Path(probe.stdout.strip()).resolve() == (root / ".orch/toolchain/venv").resolve()


def test_a_file_it_cannot_merge_is_one_line_and_nothing_is_written(ws: tuple[Path, Path]) -> None:
    root, store = ws
    tasks = root / ".vscode/tasks.json"
    good = tasks.read_text()
    launch_before = (root / ".vscode/launch.json").read_text()
    tasks.write_text('{"version": "2.0.0", "tasks": [ {"label": "x",, } ]}')
    try:
        res = run_doit(root, "vscode", f"store={store}")
        assert res.returncode == 2, res.output
        lines = [ln for ln in res.output.splitlines() if ln.strip()]
        assert any(str(tasks) in ln and "not valid JSON" in ln for ln in lines), res.output
        assert "Traceback" not in res.output
        assert (root / ".vscode/launch.json").read_text() == launch_before
    finally:
        tasks.write_text(good)


def test_cmake_presets_configure_the_demo_with_the_toolchain(ws: tuple[Path, Path]) -> None:
    root, store = ws
    src = root / "recipes/demo"
    presets = loads_jsonc((src / "CMakePresets.json").read_text(), src / "CMakePresets.json")
    names = {p["name"]: p for p in presets["configurePresets"]}
    assert set(names) == {"orch-relwithdebinfo", "orch-release", "orch-debug"}
    rel = names["orch-relwithdebinfo"]["cacheVariables"]
    assert rel["CMAKE_BUILD_TYPE"] == "RelWithDebInfo"
    assert f"-ffile-prefix-map={src}=/orch/src/demo" in rel["CMAKE_CXX_FLAGS"]
    assert "-gdwarf-4" in rel["CMAKE_CXX_FLAGS"]
    cmake = names["orch-relwithdebinfo"]["cmakeExecutable"]
    assert Path(cmake).is_file()
    res = subprocess.run([cmake, "--preset", "orch-release"], cwd=src, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    cache = (Path(names["orch-release"]["binaryDir"]) / "CMakeCache.txt").read_text()
    assert "CMAKE_BUILD_TYPE:STRING=Release" in cache
    assert re.search(rf"^CMAKE_MAKE_PROGRAM:\w+={re.escape(rel['CMAKE_MAKE_PROGRAM'])}$", cache, re.M)
    # The presets file in the source tree does not change the artifact's identity.
    again = run_doit(root, "build", "variant=relwithdebinfo", "substitute=0", f"store={store}")
    assert again.returncode == 0 and "up to date" in again.output, again.output


def test_jsonc_comments_and_trailing_commas_outside_strings_only() -> None:
    text = ('// head\n{"url": "http://x//y /* kept */", "list": [1, 2, /* c */ ], '
            '/* x */ "obj": {"q": "a\\"b,}",},}')
    assert loads_jsonc(text, Path("x.json")) == {
        "url": "http://x//y /* kept */", "list": [1, 2], "obj": {"q": 'a"b,}'}}


def test_prelaunch_task_builds_an_edit_and_the_debugger_runs_it(ws: tuple[Path, Path],
                                                                  tmp_path: Path) -> None:
    """F5 after an edit: the preLaunchTask (run as VS Code runs it) rebuilds and re-points the
    profile, so the generated launch configuration runs the edited code."""
    from dap_client import run_to_exit

    from orchestrator.ide.variables import resolve_variables

    root, store = ws
    kernel = root / "recipes/demo/ops/add_kernel.cpp"
    kernel.write_text(kernel.read_text().replace("alpha * other.data()[i];",
                                                 "alpha * other.data()[i] + 1000;"))
    before = (root / ".orch/profile").resolve()
    tasks = {t["label"]: t for t in json.loads((root / ".vscode/tasks.json").read_text())["tasks"]}
    task = resolve_variables(tasks["orch: build"], root)  # as VS Code runs it
    env = {**{k: v for k, v in os.environ.items() if k != "MAX_JOBS"}, "ORCH_STORE": str(store)}
    done = subprocess.run([task["command"], *task["args"]], cwd=task["options"]["cwd"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (root / ".orch/profile").resolve() != before
    script = tmp_path / "run.py"
    script.write_text("import demo\nprint('sum', demo.add([1.0], [2.0], alpha=1.0))\n")
    configs = json.loads((root / ".vscode/launch.json").read_text())["configurations"]
    [config] = [c for c in configs if c["name"] == "orch: Python + C++ (lldb-14)"]
    code, out = run_to_exit(resolve_variables(config, root, script))
    assert code == 0 and "sum [1003.0]" in out, out
