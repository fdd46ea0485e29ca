"""The interpreter is probed once per process (make_plan and ensure_toolchain both check it)
and, through the store's probe cache, once per binary across processes; a replaced binary,
or the full check, probes it again."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from orchestrator.errors import UserError
from orchestrator.hashing import StatCache
from orchestrator.lock.probe import probe_python
from orchestrator.lock.probe_cache import ProbeCache
from orchestrator.model.lock import Lock
from orchestrator.toolchain import machine_check
from orchestrator.toolchain.machine_check import check_interpreter, check_machine


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []

    def probe(path: str):  # type: ignore[no-untyped-def]
        calls.append(path)
        return probe_python(path)

    monkeypatch.setattr(machine_check, "probe_python", probe)
    monkeypatch.setattr(machine_check, "_PYTHON_PROBES", {})
    return calls


def lock_for(python: Path) -> Lock:
    return Lock(name="t", spec_sha256="0" * 64, platform={},
                entries={"python": probe_python(str(python))})


def test_plan_and_toolchain_share_one_probe(tmp_path: Path, counted: list[str]) -> None:
    py = tmp_path / "python3"
    shutil.copy2(os.path.realpath("/usr/bin/python3"), py)
    lock = lock_for(py)
    check_machine(lock, ["python"], StatCache(tmp_path / "stat.json"))  # what make_plan does
    check_interpreter(lock)                                              # what ensure_toolchain does
    check_interpreter(lock)
    assert counted == [str(py)]
    check_machine(lock, ["python"])  # the full check (verify toolchain=1, check=1): probed again
    assert len(counted) == 2


def test_a_replaced_interpreter_is_probed_again(tmp_path: Path, counted: list[str]) -> None:
    py = tmp_path / "python3"
    shutil.copy2(os.path.realpath("/usr/bin/python3"), py)
    lock = lock_for(py)
    check_interpreter(lock)
    with open(py, "ab") as f:  # same path, other content: drift, found without a restart
        f.write(b"\0")
    with pytest.raises(UserError, match=r"lock drift: python .* sha256"):
        check_interpreter(lock)
    assert len(counted) == 2


def test_interpreter_answers_are_remembered_across_processes(tmp_path: Path,
                                                             counted: list[str]) -> None:
    """A plan's check reuses the store's probe cache (a new process: the in-process memo is
    gone); a touched interpreter is probed again, a replaced one is drift."""
    py = tmp_path / "python3"
    shutil.copy2(os.path.realpath("/usr/bin/python3"), py)
    lock = lock_for(py)
    stats, probes_file = StatCache(tmp_path / "stat.json"), tmp_path / "probes.json"
    check_machine(lock, ["python"], stats, probes=ProbeCache(probes_file))
    assert counted == [str(py)] and probes_file.is_file()
    machine_check._PYTHON_PROBES.clear()  # what a new process starts with
    check_machine(lock, ["python"], stats, probes=ProbeCache(probes_file))
    assert counted == [str(py)]
    machine_check._PYTHON_PROBES.clear()
    os.utime(py, ns=(py.stat().st_atime_ns, py.stat().st_mtime_ns + 1_000_000_000))
    check_machine(lock, ["python"], stats, probes=ProbeCache(probes_file))
    assert len(counted) == 2
    machine_check._PYTHON_PROBES.clear()
    with open(py, "ab") as f:
        f.write(b"\0")
    with pytest.raises(UserError, match=r"lock drift: python .* sha256"):
        check_machine(lock, ["python"], stats, probes=ProbeCache(probes_file))
    assert len(counted) == 3
