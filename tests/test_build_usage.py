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
