"""Toolchain integrity: a materialized toolchain's files are pinned by a manifest, the
compiler lock entry pins what the driver runs, and `doit lock` refuses a wrapper on PATH.

One real toolchain is materialized from a small lock (the system python only: a venv, no
downloads); the ninja case uses a toolchain directory laid out like a real one.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import copy_project

from orchestrator.builders.process import run_logged
from orchestrator.errors import UserError
from orchestrator.lock.files import load_lock, save_lock
from orchestrator.lock.resolve import resolve_lock
from orchestrator.model.lock import CompilerEntry
from orchestrator.store import tree_manifest
from orchestrator.store.artifacts import Store
from orchestrator.toolchain.machine_check import check_machine
from orchestrator.toolchain.materialize import (
    FILES_MANIFEST,
    TOOLCHAIN_JSON,
    check_toolchain,
    ensure_toolchain,
    linked_toolchain,
    toolchain_hash,
)

REPO = Path(__file__).resolve().parents[1]
MINI_SPEC = '[python]\ninterpreter = "/usr/bin/python3"\n'
MINI_RECIPE = """\
lock = "mini"
[source]
kind = "path"
path = "demo"
[build]
system = "cmake"
uses = ["python"]
[variants.release]
build_type = "Release"
"""


def _project_with_mini_lock(root: Path) -> Path:
    project = copy_project(root / "project")
    (project / "locks" / "mini.toml").write_text(MINI_SPEC)
    save_lock(project / "locks", resolve_lock(project / "locks", "mini"))
    (project / "recipes" / "mini.toml").write_text(MINI_RECIPE)
    return project


def _doit(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCH_")}
    return subprocess.run([sys.executable, "-m", "doit", "-f", str(project / "dodo.py"), *args],
                          cwd=project, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def mini(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(project, store root, toolchain dir) with the mini lock materialized for real."""
    root = tmp_path_factory.mktemp("integrity")
    project = _project_with_mini_lock(root)
    store = root / "store"
    tc = ensure_toolchain(Store(store), load_lock(project / "locks", "mini"))
    return project, store, tc.root


def test_materializing_writes_a_manifest_of_every_file(mini: tuple[Path, Path, Path]) -> None:
    _, _, root = mini
    entries = tree_manifest.read(root, FILES_MANIFEST)
    assert entries is not None
    assert TOOLCHAIN_JSON in entries and "venv/pyvenv.cfg" in entries
    e = entries["venv/pyvenv.cfg"]
    assert set(e) == {"size", "mtime_ns", "ino", "sha256", "exec"}
    assert "target" in entries["venv/bin/python"]
    check_toolchain(root)
    check_toolchain(root, full=True)


def test_changed_file_is_drift_at_use_and_at_verify(mini: tuple[Path, Path, Path]) -> None:
    project, store, root = mini
    f = root / "venv" / "pyvenv.cfg"
    original, st = f.read_bytes(), f.stat()
    try:
        # Same size, same mtime: the cheap check cannot see it, the full re-hash does.
        f.write_bytes(original[:-1] + (b"X" if original[-1:] != b"X" else b"Y"))
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
        check_toolchain(root)
        res = _doit(project, "verify", "toolchain=1", "lock=mini", f"store={store}")
        assert res.returncode == 2, res.stderr
        assert "toolchain drift:" in res.stderr and "venv/pyvenv.cfg changed" in res.stderr
        assert "Traceback" not in res.stderr
        # Junk appended: seen by every use (size/mtime), before anything runs from it.
        f.write_bytes(original + b"junk\n")
        with pytest.raises(UserError, match=r"toolchain drift: .*venv/pyvenv.cfg changed"):
            ensure_toolchain(Store(store), load_lock(project / "locks", "mini"))
        res = _doit(project, "build", "recipe=mini", "variant=release", f"store={store}",
                    "substitute=0")
        assert res.returncode == 2 and "toolchain drift:" in res.stderr, res.stderr
        assert len([ln for ln in res.stderr.splitlines() if ln.strip()]) == 1, res.stderr
    finally:
        f.write_bytes(original)
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    check_toolchain(root, full=True)


def test_a_switch_links_without_lstat_and_every_run_from_it_still_checks(
        mini: tuple[Path, Path, Path]) -> None:
    """`doit switch` runs nothing from the toolchain (linked_toolchain: no lstat of its ~20k
    files, issue 12); whatever runs a program from it (ensure_toolchain: a build, check=1,
    `doit verify`, `doit vscode`, the bot's smoke tests) still refuses a tampered file, and
    `doit verify toolchain=1` re-hashes."""
    project, store, root = mini
    lock = load_lock(project / "locks", "mini")
    f = root / "venv" / "pyvenv.cfg"
    original, st = f.read_bytes(), f.stat()
    try:
        f.write_bytes(original + b"junk\n")
        assert linked_toolchain(Store(store), lock).root == root
        with pytest.raises(UserError, match=r"toolchain drift: .*venv/pyvenv.cfg changed"):
            ensure_toolchain(Store(store), lock)
        res = _doit(project, "verify", "toolchain=1", "lock=mini", f"store={store}")
        assert res.returncode == 2 and "venv/pyvenv.cfg changed" in res.stderr, res.stderr
        res = _doit(project, "build", "recipe=mini", "variant=release", f"store={store}",
                    "substitute=0")
        assert res.returncode == 2 and "toolchain drift:" in res.stderr, res.stderr
    finally:
        f.write_bytes(original)
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    check_toolchain(root, full=True)


def test_linking_a_missing_toolchain_materializes_it(tmp_path: Path) -> None:
    project = _project_with_mini_lock(tmp_path)
    lock = load_lock(project / "locks", "mini")
    tc = linked_toolchain(Store(tmp_path / "store"), lock)
    assert (tc.root / TOOLCHAIN_JSON).is_file() and (tc.root / FILES_MANIFEST).is_file()
    check_toolchain(tc.root)


def test_added_file_is_reported_by_the_full_check(mini: tuple[Path, Path, Path]) -> None:
    project, store, root = mini
    extra = root / "venv" / "bin" / "gcc"
    extra.write_text("#!/bin/sh\nexec /usr/bin/gcc -O0 \"$@\"\n")
    try:
        res = _doit(project, "verify", "toolchain=1", "lock=mini", f"store={store}")
        assert res.returncode == 2 and "venv/bin/gcc was added" in res.stderr, res.stderr
    finally:
        extra.unlink()


def test_zero_byte_ninja_is_drift_not_a_traceback(tmp_path: Path) -> None:
    project = _project_with_mini_lock(tmp_path)
    lock = load_lock(project / "locks", "mini")
    store = Store(tmp_path / "store").ensure()
    root = store.toolchains_dir / toolchain_hash(lock)
    (root / "venv" / "bin").mkdir(parents=True)
    ninja = root / "venv" / "bin" / "ninja"
    shutil.copyfile("/bin/true", ninja)
    os.chmod(ninja, 0o755)
    (root / TOOLCHAIN_JSON).write_text(json.dumps({"lock": "mini"}))
    tree_manifest.write(root, FILES_MANIFEST)
    assert ensure_toolchain(store, lock).ninja == ninja
    ninja.write_bytes(b"")
    with pytest.raises(UserError, match=r"toolchain drift: .*venv/bin/ninja changed"):
        ensure_toolchain(store, lock)
    res = _doit(project, "build", "recipe=mini", "variant=release", f"store={store.root}",
                "substitute=0")
    assert res.returncode == 2, res.stderr
    assert "venv/bin/ninja changed" in res.stderr and "Traceback" not in res.stderr
    # Running it anyway (a toolchain without a manifest) is one error, not a traceback.
    with pytest.raises(UserError, match="cannot run"):
        run_logged([ninja, "--version"], env={}, log=tmp_path / "log", title="ninja")


def test_toolchain_without_manifest_is_reported(tmp_path: Path) -> None:
    project = _project_with_mini_lock(tmp_path)
    lock = load_lock(project / "locks", "mini")
    store = Store(tmp_path / "store").ensure()
    root = store.toolchains_dir / toolchain_hash(lock)
    root.mkdir()
    (root / TOOLCHAIN_JSON).write_text("{}")
    ensure_toolchain(store, lock)  # an older toolchain still works
    res = _doit(project, "verify", "toolchain=1", "lock=mini", f"store={store.root}")
    assert res.returncode == 1 and "no file manifest" in res.stderr, res.stderr


def _wrapper_dir(tmp_path: Path) -> Path:
    d = tmp_path / "wrappers"
    d.mkdir()
    w = d / "gcc"
    w.write_text('#!/bin/sh\nexec /usr/bin/gcc "$@"\n')
    w.chmod(w.stat().st_mode | stat.S_IXUSR)
    return d


def test_lock_refuses_a_wrapper_found_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    locks = tmp_path / "locks"
    locks.mkdir()
    wrappers = _wrapper_dir(tmp_path)
    monkeypatch.setenv("PATH", f"{wrappers}:{os.environ['PATH']}")
    (locks / "w.toml").write_text(MINI_SPEC + '[compilers]\ncc = "gcc"\n')
    with pytest.raises(UserError, match=r"resolves on PATH to .*wrappers/gcc, a script"):
        resolve_lock(locks, "w")
    # Named explicitly, the wrapper is pinned on purpose, with what it runs.
    (locks / "w.toml").write_text(MINI_SPEC + f'[compilers]\ncc = "{wrappers / "gcc"}"\n')
    entry = resolve_lock(locks, "w").entries["compiler:cc"]
    assert isinstance(entry, CompilerEntry) and entry.path == str(wrappers / "gcc")
    assert entry.programs is not None and "cc1" in entry.programs


def test_compiler_entry_pins_what_the_driver_runs(tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    locks.mkdir()
    (locks / "c.toml").write_text(MINI_SPEC + '[compilers]\ncxx = "g++"\n')
    lock = resolve_lock(locks, "c")
    entry = lock.entries["compiler:cxx"]
    assert isinstance(entry, CompilerEntry) and entry.programs is not None
    assert {"cc1plus", "as", "ld"} <= set(entry.programs)
    for pin in entry.programs.values():
        assert os.path.isabs(pin.path) and len(pin.sha256) == 64
    check_machine(lock)
    tampered = entry.model_copy(update={"programs": {
        **entry.programs, "cc1plus": entry.programs["cc1plus"].model_copy(update={"sha256": "0" * 64})}})
    bad = lock.model_copy(update={"entries": {**lock.entries, "compiler:cxx": tampered}})
    with pytest.raises(UserError, match="lock drift: compiler:cxx .*program cc1plus sha256"):
        check_machine(bad)


def test_entries_without_programs_keep_their_digest() -> None:
    e = CompilerEntry(name="cc", path="/usr/bin/gcc", version="v", sha256="a" * 64)
    assert "programs" not in e.model_dump()
    committed = json.loads((REPO / "locks" / "pytorch.lock.json").read_text())
    lock = load_lock(REPO / "locks", "pytorch")
    assert lock.model_dump(mode="json")["entries"] == committed["entries"]
