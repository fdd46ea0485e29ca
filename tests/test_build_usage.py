"""realise.build_usage with real child processes: the CPU seconds and the largest resident
set of what a block waited for, and a build tree's sums over its runs (a failed run counts;
a file of another shape starts the sums again)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.errors import UserError
from orchestrator.realise.build_usage import USAGE_FILE, measured

# ~0.4 s of CPU, and 300 MB resident (touched) for a moment
WORK = ("import time; b = bytearray(300 << 20); b[::4096] = b'x' * len(b[::4096]); "
        "t = time.process_time()\nwhile time.process_time() - t < 0.4: pass")


def burn() -> None:
    subprocess.run([sys.executable, "-c", WORK], check=True)


def test_a_run_s_cpu_and_peak_and_the_tree_s_sums(tmp_path: Path) -> None:
    with measured(tmp_path) as first:
        burn()
    assert first.cpu_s >= 0.35 and first.peak_rss_mb >= 300, first
    assert first.build_s >= first.cpu_s * 0.5
    with measured(tmp_path) as second:
        burn()
        burn()
    assert second.cpu_s >= 0.75, second
    sums = json.loads((tmp_path / USAGE_FILE).read_text())
    assert sums["runs"] == 2 and sums["cpu_s"] == pytest.approx(first.cpu_s + second.cpu_s)
    assert sums["peak_rss_mb"] >= 300
    timings = second.timings()
    assert timings["tree_runs"] == 2 and timings["build_cpu_s"] == round(second.cpu_s, 1)


def test_a_failed_run_counts_and_a_foreign_file_starts_again(tmp_path: Path) -> None:
    (tmp_path / USAGE_FILE).write_text('{"runs": "many"}')
    with pytest.raises(RuntimeError), measured(tmp_path) as usage:
        burn()
        raise RuntimeError("the build failed")
    assert usage.cpu_s >= 0.35
    sums = json.loads((tmp_path / USAGE_FILE).read_text())
    assert sums["runs"] == 1 and sums["cpu_s"] == pytest.approx(usage.cpu_s)


def test_a_run_refused_as_bad_input_leaves_the_tree_as_it_was(tmp_path: Path) -> None:
    """A refusal (UserError: one line, exit 2) changes nothing, this file included."""
    with pytest.raises(UserError), measured(tmp_path):
        burn()
        raise UserError("recipes/x.toml: the compiler is too old for this tree")
    assert not (tmp_path / USAGE_FILE).exists()


# The command returns at once; a child it forked does the work and ends later, as mold's
# linker does (it links in a forked child that outlives the process gcc waits for).
FORKS = ("import os, sys\nif os.fork() == 0:\n    exec(sys.argv[1])\n    os._exit(0)\n"
         "print('linked', flush=True)")


def test_a_step_s_forked_child_is_counted_and_a_daemon_does_not_hold_it(tmp_path: Path) -> None:
    """Through the real step runner (builders.process.run_logged): the step's leader is a
    subreaper that waits for what the command left behind in its session, so the forked
    child's CPU and memory are the run's; a daemon (its own session) is not waited for."""
    from orchestrator.builders.process import run_logged
    env = {"PATH": "/usr/bin:/bin"}
    log = tmp_path / "build.log"
    with measured(tmp_path) as usage:
        run_logged([sys.executable, "-c", FORKS, WORK], env=env, log=log, title="link")
    assert usage.cpu_s >= 0.35 and usage.peak_rss_mb >= 300, usage
    assert "linked" in log.read_text()
    pid_file = tmp_path / "daemon.pid"
    daemon = f"setsid sh -c 'echo $$ > {pid_file}; exec sleep 60' >/dev/null 2>&1 & sleep 0.2"
    run_logged(["sh", "-c", daemon], env=env, log=log, title="daemon")
    pid = int(pid_file.read_text())
    try:
        assert Path(f"/proc/{pid}").exists()  # still running: the step did not wait for it
    finally:
        subprocess.run(["kill", str(pid)], check=False)
