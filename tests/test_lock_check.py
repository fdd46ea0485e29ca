"""`doit lock check=1` (like `uv lock --check`): the committed locks are what re-resolving
gives on this machine (exit 0, nothing written); a stale lock is exit 1 naming it and what
would change, and is left as it was. Real resolution: the system python and compilers, the
wheels and Debian packages the locks pin."""
from __future__ import annotations

import json

from conftest import REPO, copy_project, run_doit


def test_the_committed_locks_are_current(tmp_path):
    project = copy_project(tmp_path / "project")
    before = {p.name: p.read_bytes() for p in (project / "locks").iterdir()}
    res = run_doit(project, "lock", "check=1", f"store={tmp_path / 'store'}", "create=1",
                   timeout=1200)
    assert res.returncode == 0, res.output
    assert "would change" not in res.output
    for name in ("toolchain", "pytorch", "pytorch2", "cuda13", "cuda12", "cuda13-torch",
                 "pytorch2-cuda12"):
        assert f"{name}.lock.json: unchanged" in res.output, res.output
    assert {p.name: p.read_bytes() for p in (project / "locks").iterdir()} == before


def test_a_stale_lock_is_exit_1_and_left_alone(tmp_path):
    project = copy_project(tmp_path / "project")
    lock = project / "locks" / "pytorch.lock.json"
    data = json.loads(lock.read_text())
    stale = [k for k, e in data["entries"].items() if e.get("programs")]
    assert stale, "the committed pytorch lock pins its compilers' programs"
    for k in stale:
        del data["entries"][k]["programs"]  # what the committed lock lacked before issue 29
    lock.write_text(json.dumps(data, indent=2, sort_keys=True))
    text = lock.read_bytes()
    res = run_doit(project, "lock", "lock=pytorch", "check=1", f"store={tmp_path / 'store'}",
                   "create=1", timeout=1200)
    assert res.returncode == 1, res.output
    assert "Traceback" not in res.output
    assert f"pytorch.lock.json: would change ({stale[0]}" in res.output, res.output
    assert "run `doit lock`" in res.output
    assert lock.read_bytes() == text
    assert (REPO / "locks" / "pytorch.lock.json").read_bytes() != text
