"""Test-only pause points for deterministic interleavings of two processes (never set
outside the tests): with ORCH_FAULT_PAUSE="name,..." and ORCH_FAULT_DIR=DIR in the
environment, `pause(name)` writes DIR/<name>.reached and waits until DIR/<name>.go exists;
`mark(name)` only writes DIR/<name>.reached. Without them both do nothing."""
from __future__ import annotations

import os
import time
from pathlib import Path


def _dir_for(name: str) -> Path | None:
    names = os.environ.get("ORCH_FAULT_PAUSE")
    where = os.environ.get("ORCH_FAULT_DIR")
    if not names or not where or name not in names.split(","):
        return None
    return Path(where)


def mark(name: str) -> None:
    """This process reached `name` (a test waits for the file)."""
    d = _dir_for(name)
    if d is not None:
        (d / f"{name}.reached").write_text(f"{os.getpid()}\n")


def pause(name: str) -> None:
    """Mark `name`, then wait until the test says go."""
    d = _dir_for(name)
    if d is None:
        return
    mark(name)
    while not (d / f"{name}.go").exists():
        time.sleep(0.01)
