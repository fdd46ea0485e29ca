"""SIGINT and SIGKILL during a build leave nothing under store/; the next run cleans up and
resumes incrementally from the build directory (issue 2, faults)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SLOW = """
add_custom_target(slow_step ALL COMMAND sleep 120)
add_dependencies(slow_step _C demo_ops demo_core)
"""


def start_build(project: Path, store: Path, stderr: int | None = subprocess.DEVNULL) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("ORCH_STORE", "MAX_JOBS")}
    return subprocess.Popen([sys.executable, "-m", "doit", "-f", str(project / "dodo.py"), "build",
                             f"store={store}", "substitute=0"], cwd=project, env=env,
                            stdout=subprocess.DEVNULL, stderr=stderr, text=True,
                            start_new_session=True)


def sleeping_in_session(sid: int) -> bool:
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "cmdline").read_bytes() == b"sleep\x00120\x00" and os.getsid(int(proc.name)) == sid:
                return True
        except (OSError, ProcessLookupError):
            continue
    return False


def wait_for_slow_step(store: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    """Until every object is compiled and only the sleep is left running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "build ended before the slow step"
        if sleeping_in_session(proc.pid):
            return
        time.sleep(0.2)
    pytest.fail("slow step never started")


@pytest.fixture
def slow_project(project):
    cml = project / "recipes/demo/CMakeLists.txt"
    original = cml.read_text()
    cml.write_text(original.replace("include(GNUInstallDirs)", SLOW + "include(GNUInstallDirs)"))
    return project, cml, original


def committed(store: Path) -> list[str]:
    d = store / "store"
    return [p.name for p in d.iterdir()] if d.is_dir() else []


def test_sigint_leaves_nothing(slow_project, store):
    project, _, _ = slow_project
    proc = start_build(project, store)
    wait_for_slow_step(store, proc)
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=60) != 0
    assert committed(store) == []
    assert list((store / "tmp").iterdir()) == []  # staging removed on the way out


def test_sigkill_then_next_run_cleans_and_resumes(slow_project, store, doit):
    project, cml, original = slow_project
    proc = start_build(project, store)
    wait_for_slow_step(store, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert committed(store) == []
    leftovers = list((store / "tmp").iterdir())
    assert leftovers, "a killed run leaves its temp dir (the next run removes it)"
    cml.write_text(original)
    res = doit("build")
    assert res.returncode == 0, res.output
    assert not any(p.exists() for p in leftovers)
    [art] = committed(store)
    log = (store / "store" / art / "meta/build.log").read_text()
    # Incremental: the objects compiled before the kill are not compiled again.
    assert "core.cpp.o" not in log and "add_kernel.cpp.o" not in log, log


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_is_one_line_and_the_signal_s_exit_status(slow_project, store, sig):
    """Ctrl-C (SIGINT to the terminal's group) or a CI job's cancel (SIGTERM to doit) during
    the build: one `error: interrupted (...)` line on stderr, no traceback, exit 128 + the
    signal, the staging dir removed and no process of the build left (ninja's group too)."""
    project, _, _ = slow_project
    proc = start_build(project, store, stderr=subprocess.PIPE)
    wait_for_slow_step(store, proc)
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)
    else:
        os.kill(proc.pid, sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig.value, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    last = [ln for ln in err.splitlines() if ln.strip()][-1]
    assert last.startswith(f"error: interrupted ({sig.name}):"), err[-3000:]
    assert sum("interrupted" in ln for ln in err.splitlines()) == 1, err[-3000:]
    assert committed(store) == []
    assert list((store / "tmp").iterdir()) == []
    deadline = time.monotonic() + 10
    while sleeping_in_session(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not sleeping_in_session(proc.pid), "the build's slow step outlived doit"
