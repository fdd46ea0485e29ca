"""gc and `doit switch` on one store agree under the roots lock (roots_lock.py): a switch's
artifact is a root from the moment it is realised until its generation is linked. The
interleaving is made deterministic with the code's test-only pause points (fault_point.py):
the switch stops after committing, before linking; gc is started then and must wait for it.
Real cmake/ninja/gcc builds of the demo."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

POINTS = "switch-before-link,gc-planned,gc-waits-for-roots"


def start(project: Path, faults: Path, *args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("ORCH_STORE", "MAX_JOBS")}
    env.update(ORCH_FAULT_PAUSE=POINTS, ORCH_FAULT_DIR=str(faults))
    return subprocess.Popen([sys.executable, "-m", "doit", "-f", str(project / "dodo.py"), *args],
                            cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def wait_for_any(*files: Path, proc: subprocess.Popen) -> Path:
    """The first of `files` to exist (a guard, not a timing: it fails only if the process
    ends without reaching any of them or ten minutes pass)."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        for f in files:
            if f.exists():
                return f
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"ended ({proc.returncode}) before {files}:\n{out}\n{err}")
        time.sleep(0.02)
    raise AssertionError(f"none of {files} reached")


def test_gc_waits_for_a_switch_between_commit_and_link(doit, project, store, tmp_path):
    first = doit("switch", "variant=release", f"workspace={project}")
    assert first.returncode == 0, first.output
    faults = tmp_path / "faults"
    faults.mkdir()
    switch = start(project, faults, "switch", "variant=relwithdebinfo", f"workspace={project}",
                   f"store={store}", "substitute=0")
    wait_for_any(faults / "switch-before-link.reached", proc=switch)  # built and committed
    [built] = [p for p in (store / "store").iterdir() if p.name.endswith("-relwithdebinfo")]
    gc = start(project, faults, "gc", "keep=1", f"store={store}")
    # Without the lock gc works out what to keep now, while the new artifact is in no
    # generation yet; with it, gc waits for the switch.
    reached = wait_for_any(faults / "gc-waits-for-roots.reached", faults / "gc-planned.reached",
                           proc=gc)
    (faults / "switch-before-link.go").touch()
    out, err = switch.communicate(timeout=600)
    assert switch.returncode == 0, out + err
    assert "switched" in err + out
    (faults / "gc-planned.go").touch()
    gc_out, gc_err = gc.communicate(timeout=600)
    assert gc.returncode == 0, gc_out + gc_err
    active = Path(os.path.realpath(project / ".orch/profile"))
    assert active == built.resolve() and (active / "manifest.json").is_file(), \
        "the profile points at an artifact gc deleted"
    assert reached.name == "gc-waits-for-roots.reached", "gc planned while a switch held a root"
    assert "waiting for a switch or commit in progress" in gc_err + gc_out
    assert not [p for p in (store / "store").iterdir() if p.name.endswith("-release")]
