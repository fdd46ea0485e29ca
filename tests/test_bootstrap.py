"""bootstrap.sh and .ci/pytorch-prereqs.sh explain themselves (issue 35): each step is named
as it starts, a failed one is named with its exit status and its log, apt waits for the dpkg
lock (apt's own DPkg::Lock::Timeout) instead of failing, and a set-up ends with what to run
next. The step runner and apt run for real; the dpkg lock is held by this test for a few
seconds, as unattended-upgrades holds it on a fresh machine."""
from __future__ import annotations

import fcntl
import os
import re
import subprocess
import threading
import time
from pathlib import Path

from conftest import REPO

STEPS = REPO / ".ci/steps.sh"


def bash(script: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f"set -euo pipefail; . {STEPS}; {script}"],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_steps_are_named_as_they_start_and_a_failure_names_its_log(tmp_path: Path) -> None:
    env = {"ORCH_STEP_LOGS": str(tmp_path)}
    res = bash("step 'say hello' echo hello; step 'fail on purpose' "
               "bash -c 'echo first line; echo the cause >&2; exit 3'; echo not reached", env)
    assert res.returncode == 3, res.stdout + res.stderr
    assert res.stdout.splitlines()[:3] == ["==> say hello", "    ok (0s)", "==> fail on purpose"]
    assert "not reached" not in res.stdout
    m = re.search(r"^error: step 'fail on purpose' failed \(exit 3\); its log: (\S+)$",
                  res.stderr, re.M)
    assert m, res.stderr
    log = Path(m[1])
    assert log.parent == tmp_path and "the cause" in log.read_text()
    assert "    | the cause" in res.stderr                       # the log's last lines shown


def test_apt_waits_for_the_dpkg_lock_instead_of_failing() -> None:
    lock_file = "/var/lib/dpkg/lock-frontend"
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o640)
    fcntl.lockf(fd, fcntl.LOCK_EX)  # the POSIX record lock apt and dpkg take
    released = threading.Event()

    def release_later() -> None:
        time.sleep(4)
        fcntl.lockf(fd, fcntl.LOCK_UN)
        os.close(fd)
        released.set()

    try:
        plain = subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends",
                                "zstd"], capture_output=True, text=True, timeout=60)
        assert plain.returncode != 0 and "Could not get lock" in plain.stderr, plain  # held
        threading.Thread(target=release_later, daemon=True).start()
        t0 = time.monotonic()
        res = bash("apt_get install -y -q --no-install-recommends zstd",
                   {"ORCH_APT_LOCK_TIMEOUT": "120"})
        waited = time.monotonic() - t0
    finally:
        if not released.is_set():
            released.wait(10)
    assert res.returncode == 0, res.stdout + res.stderr
    assert waited >= 3, waited                                     # it waited for the holder
    assert "Could not get lock" not in res.stderr


def test_every_apt_call_waits_for_the_lock_and_bootstrap_ends_with_the_next_commands() -> None:
    for script in (REPO / "bootstrap.sh", REPO / ".ci/pytorch-prereqs.sh"):
        code = [ln for ln in script.read_text().splitlines() if not ln.lstrip().startswith("#")]
        raw = [ln for ln in code if re.search(r"(^|[\s;&|(])apt-get\s", ln)
                                  and "apt-get source" not in ln]
        assert raw == [], (script.name, raw)             # apt goes through apt_get (waits)
        assert any("apt_get " in ln for ln in code), script.name
        assert not any(">/dev/null" in ln and "apt_get" in ln for ln in code), script.name
    body = [ln for ln in (REPO / "bootstrap.sh").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]
    assert body[-1] == "next_steps"
    assert sum(ln.startswith("step ") for ln in body) >= 5
    nxt = bash("next_steps").stdout
    readme = (REPO / "README.md").read_text()
    for cmd in (". .venv/bin/activate", ". .orch/env.sh", "doit help"):
        assert cmd in nxt and cmd in readme, cmd
