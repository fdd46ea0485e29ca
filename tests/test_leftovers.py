"""Nothing stray after kills, no compiler outliving the orchestrator, no writes into a
committed store entry (and `doit verify`'s store-entry check names any that happen)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from orchestrator.errors import CheckFailed
from orchestrator.model.manifest import Manifest
from orchestrator.store.artifacts import Store
from orchestrator.verbs.verify import check_store_entry
from orchestrator.verify.store_entry import entry_changes
from orchestrator.workspace.profiles import Workspace

OUTPUTS = {"lib": ["lib"], "bin": ["bin"], "python": ["python"]}


def dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def _artifact(store: Store, name: str = "x") -> Path:
    """A real commit of a tiny staged artifact (a python package in prefix/python)."""
    with store.staging(name) as stage:
        (stage / "prefix" / "python" / "pkg").mkdir(parents=True)
        (stage / "prefix" / "python" / "pkg" / "__init__.py").write_text("VALUE = 1\n")
        (stage / "meta").mkdir()
        m = Manifest(id="a" * 40, recipe="demo", variant=name, derivation={"n": name},
                     files=Manifest.scan_files(stage))
        return store.commit(stage, m)


def test_next_switch_removes_temp_files_of_killed_ones(tmp_path: Path) -> None:
    store = Store(tmp_path / "store").ensure()
    art = _artifact(store)
    ws = Workspace(tmp_path / "ws")
    ws.orch.mkdir(parents=True)
    pid = dead_pid()
    stale = [ws.orch / f".workspace-links.json.tmp-{pid}-0a1b2c3d",
             ws.orch / f".profile.tmp-{pid}-deadbeef", ws.orch / f".env.sh.tmp-{pid}-00ff00ff"]
    for p in stale:
        p.write_text("half")
    mine = ws.orch / f".env.sh.tmp-{os.getpid()}-12345678"  # a live writer's: kept
    mine.write_text("in progress")
    ws.switch(art, store, None, OUTPUTS)
    assert not any(p.exists() for p in stale)
    assert mine.exists()
    mine.unlink()


def test_env_script_keeps_python_out_of_the_store(tmp_path: Path) -> None:
    store = Store(tmp_path / "store").ensure()
    art = _artifact(store)
    ws = Workspace(tmp_path / "ws")
    ws.switch(art, store, None, OUTPUTS)
    assert "export PYTHONDONTWRITEBYTECODE=1" in ws.env_script.read_text()
    run = subprocess.run(["bash", "-c", f". '{ws.env_script}' && python3 -c 'import pkg'"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert not list(art.rglob("__pycache__"))
    check_store_entry(art)  # unchanged: no CheckFailed


def test_verify_names_files_written_into_a_store_entry(tmp_path: Path) -> None:
    store = Store(tmp_path / "store").ensure()
    art = _artifact(store)
    pkg = art / "prefix" / "python" / "pkg"
    os.chmod(pkg, 0o755)
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"\0" * 16)
    init = pkg / "__init__.py"
    os.chmod(init, 0o644)
    init.write_text("VALUE = 2\n")
    changes = entry_changes(art, Store.read_manifest(art))
    assert changes.extra == ["prefix/python/pkg/__pycache__/__init__.cpython-311.pyc"]
    assert changes.changed == ["prefix/python/pkg/__init__.py"]
    with pytest.raises(CheckFailed, match="differs from its manifest") as err:
        check_store_entry(art)
    assert "extra: prefix/python/pkg/__pycache__" in (err.value.report or "")


DRIVER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from orchestrator.builders.process import run_logged
    out = Path(sys.argv[1])
    # A "ninja" whose "compiler" runs in the background, as ninja's children do.
    run_logged(["sh", "-c", f"sleep 300 & echo $! > {out}/child; wait"],
               env={"PATH": "/usr/bin:/bin"}, log=out / "log", title="build")
""")


# The real ninja: it runs each job in a process group of its own, out of reach of a kill of
# ninja's group (the job writes its pid, then becomes the long "compile").
NINJA_DRIVER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from orchestrator.builders.process import run_logged
    out = Path(sys.argv[1])
    (out / "build.ninja").write_text(
        "rule compile\\n  command = echo $$$$ > child.tmp && mv child.tmp child && exec sleep 300\\n"
        "build obj.o: compile\\n")
    run_logged([sys.argv[2], "-C", str(out)], env={"PATH": "/usr/bin:/bin"}, log=out / "log",
               title="build")
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _wait_for(cond, limit: int = 600) -> bool:  # noqa: ANN001 - a predicate
    for _ in range(limit):  # bounded: at most limit * 0.1 s, no timing asserted
        if cond():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("driver", ["sh", "ninja"])
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_killing_the_orchestrator_ends_its_compilers(sig: signal.Signals, driver: str,
                                                     tmp_path: Path, request) -> None:
    repo = Path(__file__).resolve().parents[1]
    ninja = ""
    if driver == "ninja":  # the toolchain's pinned ninja
        ninja = str(request.getfixturevalue("session_toolchain") / "venv" / "bin" / "ninja")
    argv = [sys.executable, "-c", DRIVER, str(tmp_path)] if driver == "sh" else \
        [sys.executable, "-c", NINJA_DRIVER, str(tmp_path), ninja]
    proc = subprocess.Popen(argv, cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    child_file = tmp_path / "child"
    try:
        assert _wait_for(lambda: child_file.is_file() and child_file.read_text().strip())
        child = int(child_file.read_text())
        assert _alive(child)
        proc.send_signal(sig)
        proc.wait(timeout=60)
        assert _wait_for(lambda: not _alive(child)), f"compiler {child} outlived the orchestrator"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if child_file.is_file() and child_file.read_text().strip():
            try:
                os.kill(int(child_file.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.parametrize("durable", ["0", "1"])
def test_a_commit_is_fsynced_only_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             durable: str) -> None:
    """ORCH_FSYNC=1: every committed file, its directories and store/ reach the disk before
    the commit returns; by default none is fsynced (fs.durable_commits)."""
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setenv("ORCH_FSYNC", durable)
    monkeypatch.setattr(os, "fsync", fsync)
    store = Store(tmp_path / "store")
    store.ensure()
    final = _artifact(store)
    if durable == "0":
        assert synced == []
        return
    names = {Path(p).name for p in synced}
    assert {"__init__.py", "manifest.json", "pkg", "python", "prefix", "meta", "store"} <= names
    assert (final / "prefix/python/pkg/__init__.py").read_text() == "VALUE = 1\n"
