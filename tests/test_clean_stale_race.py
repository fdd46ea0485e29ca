"""`Store.clean_stale` under concurrency (issue 33): a killed build's leftovers in tmp/ and two
processes that clean them at once (what two `doit build`s on one store do first, in
realise) both finish without an error, and nothing is left."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from orchestrator.store.artifacts import Store

KILLED_BUILD = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from orchestrator.store.artifacts import Store
    stage = Store(Path(sys.argv[1])).ensure().new_temp("build-demo-relwithdebinfo")
    for d in range(150):
        sub = stage / "meta" / f"d{d:03}"
        sub.mkdir(parents=True)
        for f in range(20):
            (sub / f"f{f}").write_text("x")
        os.chmod(sub, 0o555)  # as a commit leaves them before its rename
    print(stage, flush=True)
    time.sleep(600)
""")

CLEANER = ("import sys; from pathlib import Path; from orchestrator.store.artifacts import Store; "
           "print(len(Store(Path(sys.argv[1])).clean_stale()))")


def _killed_build_leftover(root: Path) -> Path:
    """A staging dir of a real process, killed (SIGKILL) in the middle of its build."""
    p = subprocess.Popen([sys.executable, "-c", KILLED_BUILD, str(root)], stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout is not None
    stage = Path(p.stdout.readline().strip())
    p.kill()
    p.wait()
    assert stage.is_dir() and stage.parent == root / "tmp"
    return stage


def _cleaner(root: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CLEANER, str(root)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _started_on(stage: Path, mode: int, cleaner: subprocess.Popen) -> bool:
    """Wait until `cleaner` has begun on `stage` (renamed it, or made it writable)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and cleaner.poll() is None:
        try:
            if os.lstat(stage).st_mode != mode:
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.0005)  # no busy loop: the cleaner shares the cores
    return False


def test_two_cleaners_at_once_on_a_killed_builds_leftovers(tmp_path: Path) -> None:
    root = tmp_path / "store"
    stage = _killed_build_leftover(root)
    os.chmod(stage, 0o555)
    mode = os.lstat(stage).st_mode
    first = _cleaner(root)
    assert _started_on(stage, mode, first), "the first cleaner never began on the leftover"
    os.kill(first.pid, signal.SIGSTOP)  # in the middle of its removal
    try:
        second = _cleaner(root)
        out2, err2 = second.communicate(timeout=120)
    finally:
        os.kill(first.pid, signal.SIGCONT)
    out1, err1 = first.communicate(timeout=120)
    assert "Traceback" not in err1 + err2, err1 + err2
    assert (first.returncode, second.returncode) == (0, 0)
    assert sorted([out1.strip(), out2.strip()]) == ["0", "1"]  # one of them removed it
    assert list((root / "tmp").iterdir()) == []


def test_a_cleaner_killed_while_removing_leaves_a_stale_temp_for_the_next(tmp_path: Path) -> None:
    root = tmp_path / "store"
    stage = _killed_build_leftover(root)
    os.chmod(stage, 0o555)
    mode = os.lstat(stage).st_mode
    first = _cleaner(root)
    assert _started_on(stage, mode, first)
    first.kill()
    first.wait()
    Store(root).clean_stale()  # the claimed (renamed) leftover is stale too: removed
    assert list((root / "tmp").iterdir()) == []
