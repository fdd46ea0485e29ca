"""The .vscode/ files: launch.json (lldb-dap, gdb, debugpy, attach, debug-env), tasks.json
(the preLaunchTask and one switch per variant), settings.json and c_cpp_properties.json."""
from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator.ide.debugger_init import (
    EXACT_LINES,
    GDB_SCRIPT,
    LLDB_SCRIPT,
    PRELOAD_OFF,
    SCRIPTS_DIR,
    cuda_gdb_commands,
    wrappers,
)
from orchestrator.ide.jsonc import OURS, merge_named, read_json
from orchestrator.ide.spec import WS, IdeSpec
from orchestrator.toolchain.debugger_env import locate

CUDA_GDB_CONFIG = f"{OURS}Python + CUDA (cuda-gdb)"
# Runtime toggles of the "debug-env" configurations (PyTorch-style native debugging).
DEBUG_ENV = {"CUDA_LAUNCH_BLOCKING": "1", "TORCH_SHOW_CPP_STACKTRACES": "1",
             "PYTHONFAULTHANDLER": "1"}


def first_wins(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """cppdbg's sourceFileMap is one target per prefix: keep the first (primary) one."""
    out: dict[str, str] = {}
    for a, b in pairs:
        out.setdefault(a, b)
    return out


def launch_configurations(spec: IdeSpec) -> list[dict[str, Any]]:
    """Native (lldb-vscode, gdb), Python (debugpy), attach, and debug-env configurations."""
    env = spec.env(absolute=False)
    smap = spec.source_map(absolute=False)
    adapter = spec.ws(".orch/bin/lldb-vscode", absolute=False)
    program, args, task = spec.python(absolute=False), ["${file}"], f"{OURS}build"
    # py-bt and the PyTorch type summaries in the Debug Console (what .lldbinit loads)
    lldb_init = [PRELOAD_OFF, EXACT_LINES,
                 f"command script import {spec.ws(f'{SCRIPTS_DIR}/{LLDB_SCRIPT}', absolute=False)}"]

    def lldb_launch(name: str, extra_env: Mapping[str, str]) -> dict[str, Any]:
        return {"name": name, "type": "lldb-dap", "request": "launch",
                "program": program, "args": args, "cwd": WS,
                "env": [f"{k}={v}" for k, v in {**env, **extra_env}.items()],
                "sourceMap": [list(p) for p in smap], "initCommands": lldb_init,
                "debugAdapterExecutable": adapter, "preLaunchTask": task}

    # the wrapper (debugger_init.gdb_wrapper): gdb without the caller's PYTHONHOME/PYTHONPATH
    gdb = (spec.ws(".orch/bin/gdb", absolute=False) if spec.gdb is not None
           else str(shutil.which("gdb") or "/usr/bin/gdb"))
    gdb_setup = [{"description": "pretty printing", "text": "-enable-pretty-printing",
                  "ignoreFailures": True},
                 {"description": "break in libraries loaded later (the extension)",
                  "text": "set breakpoint pending on", "ignoreFailures": True},
                 {"description": "gdb's DWARF index cache",
                  "text": "set index-cache enabled on", "ignoreFailures": True},
                 {"description": "py-bt and the PyTorch printers",
                  "text": f"source {spec.ws(f'{SCRIPTS_DIR}/{GDB_SCRIPT}', absolute=False)}",
                  "ignoreFailures": True}]
    configs: list[dict[str, Any]] = [
        lldb_launch(f"{OURS}Python + C++ (lldb-14)", {}),
        {"name": f"{OURS}Python + C++ (gdb)", "type": "cppdbg", "request": "launch",
         "program": program, "args": args, "cwd": WS, "MIMode": "gdb", "miDebuggerPath": gdb,
         "environment": [{"name": k, "value": v} for k, v in env.items()],
         "sourceFileMap": first_wins(smap), "setupCommands": gdb_setup, "stopAtEntry": False,
         "externalConsole": False, "preLaunchTask": task},
        {"name": f"{OURS}Python (debugpy)", "type": "debugpy", "request": "launch",
         "program": "${file}", "python": program, "cwd": WS, "env": env,
         "console": "integratedTerminal", "justMyCode": False, "preLaunchTask": task},
        {"name": f"{OURS}attach C++ to a process (lldb-14)", "type": "lldb-dap",
         "request": "attach", "pid": "${command:pickProcess}", "program": program,
         "sourceMap": [list(p) for p in smap], "initCommands": lldb_init,
         "debugAdapterExecutable": adapter},
        {"name": f"{OURS}attach C++ to a process (gdb)", "type": "cppdbg", "request": "attach",
         "processId": "${command:pickProcess}", "program": program, "MIMode": "gdb",
         "miDebuggerPath": gdb, "sourceFileMap": first_wins(smap), "setupCommands": gdb_setup},
        lldb_launch(f"{OURS}debug-env Python + C++ (lldb-14)", DEBUG_ENV),
        {"name": f"{OURS}debug-env Python (debugpy)", "type": "debugpy", "request": "launch",
         "program": "${file}", "python": program, "cwd": WS, "env": {**env, **DEBUG_ENV},
         "console": "integratedTerminal", "justMyCode": False, "preLaunchTask": task},
    ]
    # One F5 for both languages, as the "Python C++ Debugger" extension (type pythoncpp) runs
    # it: the debugpy launch, then the C++ attach with the process id debugpy reports.
    for native in ("lldb-14", "gdb"):
        configs.append({"name": f"{OURS}mixed Python + C++ (debugpy + {native})",
                        "type": "pythoncpp", "request": "launch",
                        "pythonConfig": "custom", "pythonLaunchName": f"{OURS}Python (debugpy)",
                        "cppConfig": "custom",
                        "cppAttachName": f"{OURS}attach C++ to a process ({native})"})
    if spec.cuda_gdb is not None:
        # The toolchain's cuda-gdb (CUDA 12.4) through cpptools' MI engine: host and device
        # breakpoints (device code of a `-G` variant; the kernel's need a GPU).
        configs.append(
            {"name": CUDA_GDB_CONFIG, "type": "cppdbg", "request": "launch",
             "program": program, "args": args, "cwd": WS, "MIMode": "gdb",
             "miDebuggerPath": spec.ws(".orch/bin/cuda-gdb", absolute=False),
             "environment": [{"name": k, "value": v} for k, v in env.items()],
             "sourceFileMap": first_wins(smap),
             "setupCommands": [{"description": c, "text": c, "ignoreFailures": True}
                               for c in cuda_gdb_commands(spec, absolute=False)],
             "stopAtEntry": False, "externalConsole": False, "preLaunchTask": task})
    if spec.deb_root is None or locate(spec.deb_root) is None:
        configs = [c for c in configs if c["type"] != "lldb-dap"
                   and c.get("cppAttachName", "").find("lldb-14") == -1]
    return configs


def launch_json(spec: IdeSpec, path: Path) -> dict[str, Any]:
    old = read_json(path)
    compounds = old.get("compounds")
    out: dict[str, Any] = {
        "version": "0.2.0",
        "configurations": merge_named(old.get("configurations", []),
                                      launch_configurations(spec), "name", path)}
    if compounds is not None:
        out["compounds"] = compounds
    return {**{k: v for k, v in old.items() if k not in out}, **out}


# -- .vscode/tasks.json ----------------------------------------------------------------------
def task_entries(spec: IdeSpec) -> list[dict[str, Any]]:
    """`orch: build` (the preLaunchTask: the active recipe and variant) and one switch per variant."""
    ws_var = [f"workspace={spec.workspace}"] if spec.workspace != spec.repo_root else []
    common = {"type": "process", "command": spec.under_ws(Path(spec.doit[0])),
              "options": {"cwd": spec.under_ws(spec.repo_root)}, "problemMatcher": ["$gcc"]}
    doit_args = [spec.under_ws(Path(a)) if a.endswith("dodo.py") else a for a in spec.doit[1:]]
    # The preLaunchTask builds what changed and makes it the profile the debugger reads
    # (`doit switch` = `doit build` + the profile link; a plain build would leave it stale).
    select = [f"recipe={spec.recipe}", f"variant={spec.variant}", *spec.select_vars]
    tasks = [{"label": f"{OURS}build", **common,
              "args": [*doit_args, "switch", *select, *ws_var],
              "group": {"kind": "build", "isDefault": True},
              "detail": f"doit switch {' '.join(select)} (build if needed, then activate)"}]
    for v in spec.variants:
        tasks.append({"label": f"{OURS}switch to {v}", **common,
                      "args": [*doit_args, "switch", f"recipe={spec.recipe}", f"variant={v}",
                               *spec.select_vars, *ws_var]})
    return tasks


def tasks_json(spec: IdeSpec, path: Path) -> dict[str, Any]:
    old = read_json(path)
    return {**old, "version": "2.0.0",
            "tasks": merge_named(old.get("tasks", []), task_entries(spec), "label", path)}


# -- .vscode/settings.json, c_cpp_properties.json ---------------------------------------------
def settings_json(spec: IdeSpec, path: Path) -> dict[str, Any]:
    ours: dict[str, Any] = {
        "python.defaultInterpreterPath": spec.python(absolute=False),
        "python.analysis.extraPaths": [*(spec.ws(f".orch/profile/prefix/{d}", absolute=False)
                                         for d in spec.outputs.get("python", [])),
                                       *(spec.ws(f".orch/profile/{d}", absolute=False)
                                         for d in spec.outputs.get("runtime", []))],
        "C_Cpp.default.compileCommands": spec.ws(".orch/profile/meta/compile_commands.json",
                                                 absolute=False),
        "cmake.sourceDirectory": spec.source(absolute=False),
        "cmake.useCMakePresets": "always",
        "cmake.cmakePath": spec.tool(spec.cmake),
    }
    if "lldb-vscode" in wrappers(spec):
        # lldb-dap's setting takes no ${workspaceFolder}: an absolute path.
        ours["lldb-dap.executable-path"] = spec.ws(".orch/bin/lldb-vscode", absolute=True)
    return {**read_json(path), **ours}


def cpp_properties_json(spec: IdeSpec, path: Path) -> dict[str, Any]:
    old = read_json(path)
    ours = [{"name": f"{OURS}{spec.recipe}",
             "compileCommands": spec.ws(".orch/profile/meta/compile_commands.json", absolute=False),
             "compilerPath": str(spec.cxx), "intelliSenseMode": "linux-gcc-x64",
             "cStandard": "c17", "cppStandard": "c++17"}]
    return {**old, "version": 4,
            "configurations": merge_named(old.get("configurations", []), ours, "name", path)}
