"""Live progress of setuptools / PEP 517 builds (issue 33): the compile ninja runs under a
build backend under pip (`pip wheel` → backend → ninja → compiler) is what the bar names, and
ninja's `[N/M]` lines, indented as pip -v prints a backend's output, move the bar. Real
processes, real ninja."""
from __future__ import annotations

import os
import subprocess
import sys
import time

from orchestrator.builders.process import NINJA_STATUS_RE, step_label
from orchestrator.builders.running_edges import running_edges
from orchestrator.process_group import spawn

# "pip" runs a "backend", which runs ninja: two processes without -o above the compile.
BACKEND = "import subprocess, sys; sys.exit(subprocess.run(['ninja', '-j1']).returncode)"


def test_the_compile_under_pip_and_its_backend_is_named(tmp_path):
    (tmp_path / "build.ninja").write_text(
        "rule slow\n  command = python3 -c 'import time; time.sleep(4)' -o $out && touch $out\n"
        "build obj/kernel.cpp.o: slow\n")
    pip = [sys.executable, "-c", f"import subprocess, sys; sys.exit(subprocess.run("
                                 f"[sys.executable, '-c', {BACKEND!r}]).returncode)"]
    step = spawn(pip, dict(os.environ), str(tmp_path))
    try:
        seen: list[str] = []
        deadline = time.monotonic() + 3.5
        while time.monotonic() < deadline and seen != ["obj/kernel.cpp.o"]:
            seen = running_edges(step.proc.pid)
            time.sleep(0.2)
        assert seen == ["obj/kernel.cpp.o"], seen
    finally:
        assert step.proc.stdout is not None
        step.proc.stdout.read()
        step.proc.wait()
        step.release()
    assert step.proc.returncode == 0


def test_ninja_status_indented_by_pip_counts():
    m = NINJA_STATUS_RE.match("  [3/7] c++ -MMD -c scale.cpp -o scale.o\n")
    assert m and (m[1], m[2]) == ("3", "7")
    # cpp_extension's edges have no description: the bar names the output, not the compiler
    line = "  [1/2] /usr/bin/g++ -MMD -c /s/csrc/main.cpp -o /store/build/k/src/build/t/csrc/main.o"
    assert step_label(line[NINJA_STATUS_RE.match(line).end():]) == "t/csrc/main.o"  # type: ignore[union-attr]


def test_before_the_first_compile_the_label_names_the_backends_step(tmp_path, session_toolchain):
    """A real `pip wheel -v` of a small setuptools project with the toolchain's pip and locked
    setuptools (no index, no isolation, as the builders run it): its lines give the labels
    shown while no [N/M] has come yet."""
    from orchestrator.builders.process import phase_label

    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n')
    (tmp_path / "setup.py").write_text("from setuptools import setup\n"
                                       "setup(name='tinyphase', version='1.0', py_modules=['tinyphase'])\n")
    (tmp_path / "tinyphase.py").write_text("X = 1\n")
    python = session_toolchain / "venv" / "bin" / "python"
    done = subprocess.run([str(python), "-m", "pip", "wheel", "-v", "--no-build-isolation",
                           "--no-deps", "--no-index", "--wheel-dir", str(tmp_path / "dist"),
                           str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, cwd=tmp_path)  # one stream, as run_logged reads it
    assert done.returncode == 0, done.stdout
    labels = [lb for line in done.stdout.splitlines() if (lb := phase_label(line)) is not None]
    assert labels[0] == "preparing metadata (pyproject.toml)", labels
    assert "building the wheel of tinyphase" in labels
    assert labels.index("setup.py: build_py") > labels.index("building the wheel of tinyphase"), labels
    assert labels[-1] == "wheel of tinyphase made"
    # scikit-build-core's steps, and setuptools' banners of stars, which are none
    assert phase_label("  *** Configuring CMake...") == "Configuring CMake"
    assert phase_label("          " + "*" * 80) is None
