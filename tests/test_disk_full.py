"""A full disk is one line naming where and what to free, exit 2, nothing half-written kept
(issue 29): the store on a small tmpfs (mounted by the test: root is part of the set-up),
real toolchain set-up (apt-get download, dpkg-deb -x, pip) and a real cmake/ninja/gcc build."""
from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_doit


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted at `where` (the set-up runs as root), unmounted after."""
    where.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                         capture_output=True, text=True)
    assert res.returncode == 0, f"mounting a tmpfs (the set-up runs as root): {res.stderr}"
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "small", "3m") as mnt:
        yield mnt


def one_line(res) -> str:
    assert "Traceback" not in res.output, res.output[-3000:]
    assert res.returncode == 2, res.output[-3000:]
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1, res.output[-3000:]
    return errors[0]


def leftovers(store: Path) -> list[str]:
    """Temps and staging directories (fs.temp_name) anywhere in the store."""
    return [str(p) for p in store.rglob("*") if ".tmp-" in p.name]


def test_toolchain_set_up_into_a_full_store(project: Path, small_fs: Path) -> None:
    store = small_fs / "store"
    res = run_doit(project, "toolchain", f"store={store}", "create=1", timeout=900)
    line = one_line(res)
    assert "no space left on the device holding" in line and str(small_fs) in line, line
    assert "doit gc" in line
    tcs = store / "toolchains"
    assert not tcs.is_dir() or not [p for p in tcs.iterdir()], list(tcs.iterdir())
    assert leftovers(store) == []


def test_a_build_into_a_full_store(project: Path, small_fs: Path, session_toolchain: Path) -> None:
    store = small_fs / "store"
    (store / "toolchains").mkdir(parents=True)
    os.symlink(session_toolchain, store / "toolchains" / session_toolchain.name)
    res = run_doit(project, "build", "variant=debug", f"store={store}", "substitute=0",
                   "compile_cache=off", timeout=900)
    line = one_line(res)
    assert "no space left on the device holding" in line and str(small_fs) in line, line
    assert not (store / "store").is_dir() or not list((store / "store").iterdir())
    assert leftovers(store) == []


@pytest.fixture
def roomy_fs(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "roomy", "96m") as mnt:
        yield mnt


def fill(fs: Path) -> None:
    """Fill the filesystem to the last block."""
    with open(fs / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 16))
                f.flush()
        except OSError:
            pass
    n = 0
    try:
        while True:  # and its last inodes' worth of small files
            (fs / f"filler-{n}").write_bytes(b"\0" * 512)
            n += 1
    except OSError:
        pass


def test_switch_and_build_on_a_full_disk(project: Path, roomy_fs: Path,
                                         session_toolchain: Path) -> None:
    store, ws = roomy_fs / "store", roomy_fs / "ws"
    ws.mkdir()
    (store / "toolchains").mkdir(parents=True)
    os.symlink(session_toolchain, store / "toolchains" / session_toolchain.name)
    built = run_doit(project, "build", "variant=release", f"store={store}", "substitute=0",
                     "compile_cache=off", timeout=900)
    assert built.returncode == 0, built.output[-3000:]
    fill(roomy_fs)
    res = run_doit(project, "switch", "variant=release", f"store={store}", f"workspace={ws}",
                   "substitute=0", "compile_cache=off", timeout=900)
    line = one_line(res)
    assert "no space left on the device holding" in line and str(roomy_fs) in line, line
    assert not (ws / ".orch" / "profile").exists()          # no generation half-made
    res = run_doit(project, "build", "variant=debug", f"store={store}", "substitute=0",
                   "compile_cache=off", timeout=900)
    line = one_line(res)
    assert "no space left on the device holding" in line and str(roomy_fs) in line, line
    assert [p.name for p in (store / "store").iterdir()] == [
        p.name for p in (store / "store").iterdir() if p.name.endswith("-release")]
    assert leftovers(store) == [] and leftovers(ws) == []
