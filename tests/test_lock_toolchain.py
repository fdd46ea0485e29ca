"""doit lock and doit toolchain: stable locks, hash-checked materialization, drift errors."""
from __future__ import annotations

import json
from pathlib import Path

from conftest import run_doit


def edit_lock(project: Path, key: str, field: str, value: str) -> None:
    path = project / "locks/toolchain.lock.json"
    data = json.loads(path.read_text())
    data["entries"][key][field] = value
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def test_lock_records_every_kind_and_is_byte_stable(project):
    path = project / "locks/toolchain.lock.json"
    before = path.read_bytes()
    # lock=toolchain: every committed lock is re-resolved by test_lock_check's check=1 already.
    res = run_doit(project, "lock", "lock=toolchain")
    assert res.returncode == 0, res.output
    assert path.read_bytes() == before, "a second lock without changes must be byte-identical"
    assert "unchanged" in res.stderr
    lock = json.loads(before)
    assert list(lock["entries"]) == sorted(lock["entries"])
    kinds = {e["kind"] for e in lock["entries"].values()}
    assert {"python", "pypi", "deb", "compiler"} <= kinds
    py = lock["entries"]["python"]
    assert py["path"] == "/usr/bin/python3" and len(py["sha256"]) == 64
    assert py["soabi"].startswith("cpython-") and py["libpython_soname"].startswith("libpython3")
    for name in ("cmake", "ninja", "torch"):
        e = lock["entries"][f"pypi:{name}"]
        assert e["filename"].endswith(".whl") and len(e["sha256"]) == 64
    for name in ("lldb-14", "python3-lldb-14"):
        e = lock["entries"][f"deb:{name}"]
        assert e["version"] and e["arch"] == "amd64" and len(e["sha256"]) == 64
    cxx = lock["entries"]["compiler:cxx"]
    assert cxx["version"].startswith("g++") and len(cxx["sha256"]) == 64


def test_changed_spec_makes_the_lock_stale(project, store):
    spec = project / "locks/toolchain.toml"
    spec.write_text(spec.read_text() + "\n# edited\n")
    res = run_doit(project, "build", f"store={store}")
    assert res.returncode == 2
    assert "is stale" in res.stderr and "doit lock" in res.stderr


def test_toolchain_rerun_is_a_no_op(session_toolchain):
    from conftest import REPO
    store = session_toolchain.parent.parent
    stamp = (session_toolchain / "toolchain.json").stat().st_mtime_ns
    res = run_doit(REPO, "toolchain", f"store={store}", "format=json")
    assert res.returncode == 0, res.output
    assert json.loads(res.stdout)["toolchain"] == str(session_toolchain)
    assert (session_toolchain / "toolchain.json").stat().st_mtime_ns == stamp
    assert (session_toolchain / "venv/bin/cmake").exists()
    assert (session_toolchain / "debs/root/usr/lib/llvm-14/bin/lldb").exists()


def test_wrong_deb_hash_stops_and_leaves_no_toolchain(project, tmp_path):
    edit_lock(project, "deb:lldb-14", "sha256", "0" * 64)
    store = tmp_path / "fresh-store"
    res = run_doit(project, "toolchain", f"store={store}")
    assert res.returncode == 2, res.output
    assert "deb:lldb-14" in res.stderr and "0" * 64 in res.stderr
    assert "Traceback" not in res.output
    assert list((store / "toolchains").iterdir()) == []


def test_wrong_wheel_hash_stops_and_leaves_no_toolchain(project, tmp_path):
    edit_lock(project, "pypi:ninja", "sha256", "1" * 64)
    store = tmp_path / "fresh-store"
    res = run_doit(project, "toolchain", f"store={store}")
    assert res.returncode == 2, res.output
    assert "locked Python packages failed" in res.stderr and "ninja" in res.stderr
    assert list((store / "toolchains").iterdir()) == []


def test_interpreter_drift_is_named(project, store):
    edit_lock(project, "python", "sha256", "2" * 64)
    res = run_doit(project, "build", f"store={store}")
    assert res.returncode == 2
    assert "lock drift: python (/usr/bin/python3) sha256" in res.stderr and "2" * 64 in res.stderr


def test_compiler_drift_is_named(project, store):
    edit_lock(project, "compiler:cxx", "sha256", "3" * 64)
    res = run_doit(project, "build", f"store={store}", "substitute=0")
    assert res.returncode == 2
    assert "lock drift: compiler:cxx (/usr/bin/g++)" in res.stderr
    assert not (store / "store").exists() or not list((store / "store").iterdir())


def test_conda_lock_file_entries_slot_in(project):
    """A conda-lock file (read with conda-lock's own models) becomes kind=conda entries."""
    import shutil

    from conftest import REPO
    shutil.copy(REPO / "tests/fixtures/conda-lock.yml", project / "locks/conda-lock.yml")
    (project / "locks/condaenv.toml").write_text(
        '[python]\ninterpreter = "/usr/bin/python3"\n\n'
        '[conda]\nlockfile = "conda-lock.yml"\nplatform = "linux-64"\n')
    res = run_doit(project, "lock", "lock=condaenv")
    assert res.returncode == 0, res.output
    entries = json.loads((project / "locks/condaenv.lock.json").read_text())["entries"]
    zlib = entries["conda:zlib"]
    assert zlib["platform"] == "linux-64" and zlib["url_filename"].startswith("zlib-1.3.1-h4ab18f5")
    assert len(zlib["sha256"]) == 64
    assert set(entries) == {"python", "conda:zlib"}  # the osx-64 record is not ours
