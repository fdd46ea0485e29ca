"""Run a build step with its output in the build log and ninja's [N/M] as a progress bar."""
from __future__ import annotations

import re
import subprocess
from collections import deque
from pathlib import Path
from typing import Sequence

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from orchestrator.console import console
from orchestrator.errors import CheckFailed

NINJA_STATUS_RE = re.compile(r"^\[(\d+)/(\d+)\] ")
NINJA_STATUS = "[%f/%t] "


class BuildFailed(CheckFailed):
    """A configure/compile/install step exited non-zero."""


def run_logged(cmd: Sequence[str | Path], *, env: dict[str, str], log: Path, title: str,
               cwd: Path | None = None) -> None:
    """Run cmd, append all output to log, show ninja progress; raise BuildFailed on error."""
    argv = [str(c) for c in cmd]
    tail: deque[str] = deque(maxlen=25)
    progress = Progress(TextColumn(f"[bold]{title}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TextColumn("{task.description}"),
                        console=console, transient=True)
    with open(log, "a") as logf, progress:
        logf.write(f"$ {' '.join(argv)}\n")
        logf.flush()
        task = progress.add_task("", total=None)
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace")
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                logf.write(line)
                tail.append(line.rstrip("\n"))
                m = NINJA_STATUS_RE.match(line)
                if m:
                    done, total = int(m[1]), int(m[2])
                    progress.update(task, completed=done, total=total,
                                    description=line[m.end():].strip()[-60:])
            rc = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    if rc != 0:
        shown = "\n".join(tail)
        raise BuildFailed(f"{title} failed (exit {rc}); full log: {log}", report=shown)
