"""CUDA's tools pinned where a registry has them (issue 32, item 5): compute-sanitizer of CUDA 13
from its wheel (nvidia-cuda-sanitizer-api, cuda-toolkit 13.0.3's `sanitizer` extra) in
locks/cuda13.toml, materialized into the toolkit root, runnable. (CUDA 12.4's comes with
Debian's nvidia-cuda-toolkit: test_cuda12_toolkit.) It is a tool, not a build input: the
`cuda:toolkit` entry, and so what is built against it, does not change with it.

cuda-gdb: no wheel carries it, so there is none for CUDA 13; cuda-gdb 12.4 (Debian's, run
through trixie's own loader and libraries) is in locks/cuda12.toml: test_cuda12_toolkit.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import REPO

from orchestrator.lock.files import load_lock
from orchestrator.model.lock import PypiEntry


def test_compute_sanitizer_13_is_locked_materialized_and_runs(session_cuda_toolchain: Path) -> None:
    lock = load_lock(REPO / "locks", "cuda13")
    pin = lock.entries["pypi:nvidia-cuda-sanitizer-api"]
    assert isinstance(pin, PypiEntry) and pin.version == "13.0.85" and len(pin.sha256) == 64
    assert "nvidia-cuda-sanitizer-api" not in lock.entries["cuda:toolkit"].packages
    tool = session_cuda_toolchain / "cuda" / "bin" / "compute-sanitizer"
    assert tool.resolve().is_relative_to(session_cuda_toolchain.resolve())
    res = subprocess.run([str(tool), "--version"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "NVIDIA (R) Compute Sanitizer" in res.stdout and "Version 2025.3.1" in res.stdout, res.stdout
