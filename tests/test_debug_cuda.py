"""CUDA host code under the pinned lldb-14: a source-line breakpoint in a host function of
cudademo's axpy.cu (compiled by nvcc, its host part by gcc with the flags lldb-14 needs)
binds and stops with the function's arguments readable. No GPU needed: the breakpoint is
before the first CUDA call."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from conftest import copy_project, make_store, run_doit


def test_host_breakpoint_in_a_cu_file_stops_with_its_arguments(tmp_path: Path,
                                                              session_cuda_toolchain: Path) -> None:
    root = copy_project(tmp_path / "checkout")
    store = make_store(tmp_path / "store", session_cuda_toolchain)
    for args in (("switch", "recipe=cudademo", "variant=relwithdebinfo", "substitute=0"),
                 ("vscode",)):
        res = run_doit(root, *args, f"store={store}")
        assert res.returncode == 0, res.output   # verify's lldb-14 reading included
    # CUDA 13 has no cuda-gdb on any registry here: no cuda-gdb files, and `doit vscode` says so;
    # asking for them is one line, exit 2 (cuda-gdb 12.4: test_debug_cuda12).
    assert "no cuda-gdb in the toolchain (CUDA 13.0" in res.output, res.output
    assert not (root / ".orch/bin/cuda-gdb").exists() and not (root / ".orch/cuda-gdbinit").exists()
    assert "cuda-gdb" not in (root / ".vscode/launch.json").read_text()
    bad = run_doit(root, "vscode", "cuda_gdb=1", f"store={store}")
    assert bad.returncode == 2 and "Traceback" not in bad.output, bad.output
    assert "cuda_gdb=1: the toolchain of recipe cudademo (lock cuda13) has CUDA 13.0" in bad.stderr, bad.output
    source = root / "recipes/cudademo/axpy.cu"
    line = next(i for i, ln in enumerate(source.read_text().splitlines(), 1)
                if ln.strip() == "*bad = -1;")
    out = subprocess.run(
        [str(root / ".orch/bin/lldb"), "-b", "-S", str(root / ".lldbinit"),
         "-o", f"breakpoint set -f axpy.cu -l {line}", "-o", "run", "-o", "frame variable n",
         "--", str(root / ".orch/profile/prefix/bin/cudademo_smoke"), "4096"],
        cwd=root, capture_output=True, text=True, timeout=180)
    text = out.stdout + out.stderr
    assert re.search(rf"frame #0: .*cudademo_selftest\(n=4096, .*\) at axpy\.cu:{line}", text), text
    assert "(int) n = 4096" in text, text
    # lldb printed the line from this checkout (the source map of .lldbinit).
    assert re.search(rf"-> +{line}\s+\*bad = -1;", text), text
