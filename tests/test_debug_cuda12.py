"""CUDA 12.4 debugging without a GPU (locks/cuda12.toml, recipe cudademo12): the debug
variant's nvcc -G puts device DWARF into the fatbin's cubin (what cuda-gdb steps through on a
GPU), and the generated cuda-gdb launch configuration, run as cpptools would run it (its
program, args, environment, setupCommands and sourceFileMap, cuda-gdb in batch mode), stops
at a host breakpoint of axpy.cu before the first CUDA call and reads the argument, whatever
Python environment the caller has. Where the toolchain has no cuda-gdb the files are absent
(test_debug_cuda, CUDA 13)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, copy_project, make_store, run_doit

from orchestrator.ide.variables import resolve_variables

CONFIG = "orch: Python + CUDA (cuda-gdb)"


@pytest.fixture(scope="module")
def ws(tmp_path_factory, cuda12_toolchain: Path, session_toolchain: Path) -> Path:
    """A checkout with cudademo12's debug variant active and `doit vscode` run."""
    base = tmp_path_factory.mktemp("cuda12-debug")
    root = copy_project(base / "checkout")
    shutil.copytree(REPO / "docs" / "examples", root / "docs" / "examples")
    store = make_store(base / "store", cuda12_toolchain, session_toolchain)
    for args in (("switch", "recipe=cudademo12", "variant=debug", "substitute=0"), ("vscode",)):
        res = run_doit(root, *args, f"store={store}")
        assert res.returncode == 0, res.output
    return root


def test_debug_variant_carries_device_debug_info_and_verifies(ws: Path) -> None:
    report = json.loads((ws / ".orch/profile/meta/verify.json").read_text())
    assert report["ok"] and report["checks"]["cuda"] == "pass", report
    assert report["files"]["prefix/lib/libcudademo.so"]["cuda"] == ["compute_90", "sm_90"]
    # The locked toolkit's cuobjdump: the sm_90 cubin carries DWARF for the device code
    # (-G; a build without it has only .debug_frame there) and the fatbin says so.
    out = subprocess.run([str(ws / ".orch/toolchain/cuda/bin/cuobjdump"), "-elf",
                          str(ws / ".orch/profile/prefix/lib/libcudademo.so")],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    elf = out.split("Fatbin elf code:", 1)[1]
    assert "arch = sm_90" in elf and "has debug info" in elf.split(".section", 1)[0], out[:2000]
    for section in (".debug_info", ".debug_line", ".nv_debug_info_reg_sass"):
        assert re.search(rf"PROGBITS .*\s{re.escape(section)}$", elf, re.M), (section, out[:3000])


def test_cuda_gdb_configuration_stops_at_a_host_line_of_the_cu_file(ws: Path) -> None:
    source = ws / "recipes/cudademo/axpy.cu"
    line = next(i for i, ln in enumerate(source.read_text().splitlines(), 1)
                if ln.strip() == "*bad = -1;")
    script = ws / "docs/examples/cuda_selftest.py"
    # The caller's Python environment: an activated venv, a stray PYTHONPATH.
    venv = Path(sys.prefix)
    hostile = {**os.environ, "VIRTUAL_ENV": str(venv), "PATH": f"{venv}/bin:{os.environ['PATH']}",
               "PYTHONPATH": "/nonexistent-python-path"}
    configs = json.loads((ws / ".vscode/launch.json").read_text())["configurations"]
    [config] = [resolve_variables(c, ws, script, hostile) for c in configs if c["name"] == CONFIG]
    assert config["type"] == "cppdbg" and config["MIMode"] == "gdb"
    assert config["miDebuggerPath"] == str(ws / ".orch/bin/cuda-gdb")
    argv = [config["miDebuggerPath"], "-batch", "-nx"]
    for cmd in [c["text"] for c in config["setupCommands"] if not c["text"].startswith("-")] + \
            [f"set substitute-path {a} {b}" for a, b in config["sourceFileMap"].items()] + \
            [f"set environment {e['name']}={e['value']}" for e in config["environment"]] + \
            [f"break axpy.cu:{line}", "run", "print n", "info source", "kill"]:
        argv += ["-ex", cmd]
    out = subprocess.run([*argv, "--args", config["program"], *config["args"]], cwd=config["cwd"],
                         env=hostile, capture_output=True, text=True, timeout=180)
    text = out.stdout + out.stderr
    assert re.search(rf"Breakpoint 1, cudademo_selftest \(n=4096, bad=0x[0-9a-f]+\) at .*axpy\.cu:{line}",
                     text), text
    assert f"{line}\t  *bad = -1;" in text and "$1 = 4096" in text, text
    assert f"Located in {source}" in text, text   # the checkout's file
    assert "Thread debugging using libthread_db enabled" in text, text
    # The same from the shell, through .orch/cuda-gdbinit (what docs/debugging.md runs).
    init = subprocess.run(
        [str(ws / ".orch/bin/cuda-gdb"), "-batch", "-nx", "-x", str(ws / ".orch/cuda-gdbinit"),
         "-ex", f"break axpy.cu:{line}", "-ex", "run", "-ex", "print *bad", "-ex", "next",
         "-ex", "print *bad", "-ex", "kill",
         "--args", str(ws / ".orch/toolchain/venv/bin/python"), str(script), "512"],
        cwd=ws, env=hostile,
        capture_output=True, text=True, timeout=180)
    text = init.stdout + init.stderr
    assert re.search(r"cudademo_selftest \(n=512, ", text) and "$2 = -1" in text, text
    # cuda-gdb itself ignores a foreign PYTHONHOME (it has no Python; its own loader).
    version = subprocess.run([str(ws / ".orch/bin/cuda-gdb"), "--version"],
                             env={**hostile, "PYTHONHOME": "/nonexistent-home",
                                  "LD_LIBRARY_PATH": "/nonexistent-lib"},
                             capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and "NVIDIA (R) cuda-gdb 12.4" in version.stdout, version


def test_a_toolchain_without_cuda_gdb_gets_no_cuda_gdb_files(ws: Path) -> None:
    """Last in this file: the IDE files for recipe=demo (no CUDA) drop cuda-gdb's, and
    asking for them there is one line, exit 2."""
    store = ws.parent / "store"
    bad = run_doit(ws, "vscode", "recipe=demo", "cuda_gdb=1", f"store={store}")
    assert bad.returncode == 2 and "Traceback" not in bad.output, bad.output
    [line] = [ln for ln in bad.stderr.splitlines() if ln.strip()]
    assert "cuda_gdb=1: the toolchain of recipe demo (lock toolchain) has no CUDA toolkit; " \
           "cuda-gdb 12.4 is pinned in locks/cuda12.toml" in line, line
    assert (ws / ".orch/bin/cuda-gdb").is_file()       # nothing written
    res = run_doit(ws, "vscode", "recipe=demo", f"store={store}")
    assert res.returncode == 0, res.output
    assert not (ws / ".orch/bin/cuda-gdb").exists() and not (ws / ".orch/cuda-gdbinit").exists()
    names = [c["name"] for c in json.loads((ws / ".vscode/launch.json").read_text())["configurations"]]
    assert CONFIG not in names and "orch: Python + C++ (gdb)" in names, names
