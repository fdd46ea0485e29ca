"""docs/debugging.md is true: its ```sh blocks run as written, in order, in one shell, in a
copy of the project after what bootstrap.sh does, with the venv activated (the debuggers must
not depend on it), and print what the doc says they print."""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from conftest import REPO, copy_project, make_store
from doc_shell import run_lines, strip_comment


def doc_blocks() -> list[str]:
    text = (REPO / "docs/debugging.md").read_text()
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        lines += [strip_comment(ln) for ln in block.splitlines()
                  if ln.strip() and not ln.lstrip().startswith("#")]
    return lines


def test_debugging_doc_commands_run_as_written(tmp_path: Path, session_toolchain: Path,
                                               cuda12_toolchain: Path) -> None:
    project = copy_project(tmp_path / "project")
    shutil.copytree(REPO / "docs", project / "docs")
    os.symlink(REPO / ".venv", project / ".venv")
    store = make_store(tmp_path / "store", session_toolchain, cuda12_toolchain)
    lines = doc_blocks()
    assert any(ln.startswith(".orch/bin/gdb ") for ln in lines) and any("-c .orch/demo.core" in ln for ln in lines)
    env = {k: v for k, v in os.environ.items() if k not in ("MAX_JOBS", "VIRTUAL_ENV")}
    env["ORCH_STORE"] = str(store)
    res = run_lines(project, [".venv/bin/doit build variant=relwithdebinfo substitute=0",
                              ".venv/bin/doit switch variant=relwithdebinfo substitute=0",
                              ". .orch/env.sh"], lines, env, 1500)
    out = res.output
    assert res.returncode == 0, f"docs/debugging.md line failed: {res.failed_line}\n{out[-5000:]}"
    output_of = res.output_of

    for tool in (".orch/bin/lldb -b -S .lldbinit -o 'breakpoint set -n demo",
                 ".orch/bin/gdb -batch -nx -x .gdbinit -ex 'break demo"):
        text = output_of(tool)
        py = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("Python ")]
        assert [p.split("/")[-1] for p in py[-3:]] == [
            "two_levels.py:7:inner", "two_levels.py:11:outer", "two_levels.py:14:<module>"], text
        assert "_PyEval_EvalFrameDefault" in text, text
    core = output_of(".orch/bin/lldb -b -S .lldbinit -c .orch/demo.core")
    assert "two_levels.py:11:outer" in core, core
    attach = output_of(".orch/bin/lldb -b -S .lldbinit -p")
    assert "(double) alpha = 0.5" in attach and ":<module>" in attach, attach
    tensors = output_of(".orch/bin/lldb -b -S .lldbinit -o 'breakpoint set -n torchext")
    assert "Float[2, 3] strides=[3, 1] cpu offset=0 numel=6 = [0, 1, 2, 3, 4, 5]" in tensors, tensors
    assert "torch_two_levels.py:7:inner" in tensors, tensors
    gdb_tensors = output_of(".orch/bin/gdb -batch -nx -x .gdbinit -ex 'break torchext")
    assert "a = Float[2, 3] strides=[3, 1] cpu offset=0 numel=6 = [0, 1, 2, 3, 4, 5]" in gdb_tensors
    # CUDA (cudademo12's -G variant): device DWARF in the cubin, the host line of axpy.cu in
    # lldb-14 and in the toolchain's cuda-gdb 12.4, before the first CUDA call.
    assert "has debug info" in output_of(".orch/toolchain/cuda/bin/cuobjdump -elf")
    cu_lldb = output_of(".orch/bin/lldb -b -S .lldbinit -o 'breakpoint set -f axpy.cu")
    assert re.search(r"cudademo_selftest\(n=4096, .*\) at axpy\.cu:18", cu_lldb), cu_lldb
    assert "(int) n = 4096" in cu_lldb, cu_lldb
    cu_gdb = output_of(".orch/bin/cuda-gdb")
    assert re.search(r"Breakpoint 1, cudademo_selftest \(n=4096, .*axpy\.cu:18", cu_gdb), cu_gdb
    assert "18\t  *bad = -1;" in cu_gdb and "$1 = 4096" in cu_gdb, cu_gdb
    assert "is not being read" not in out and "Traceback" not in out, out[-5000:]
    assert not (project / ".orch/demo.core").exists()
