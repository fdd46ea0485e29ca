"""The interpreter is probed once per process (make_plan and ensure_toolchain both check it);
a replaced binary, or the full check, probes it again."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from orchestrator import machine_check
from orchestrator.errors import UserError
from orchestrator.hashing import StatCache
from orchestrator.lock.probe import probe_python
from orchestrator.machine_check import check_interpreter, check_machine
from orchestrator.model.lock import Lock


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
