"""Run a build step with its output in the build log and ninja's [N/M] as a progress bar."""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections import deque
from pathlib import Path
from typing import IO, Sequence

from orchestrator.console import build_progress, clip_end, label_width, print_phase
from orchestrator.errors import CheckFailed, UserError

NINJA_STATUS_RE = re.compile(r"^\[(\d+)/(\d+)\] ")
NINJA_STATUS = "[%f/%t] "


class BuildFailed(CheckFailed):
    """A configure/compile/install step exited non-zero."""


# Stops the build when our end of its stdin closes without "done": that is, when this process
# dies, even by SIGKILL (the kernel closes the pipe for us). First SIGTERM to the step's leader:
# ninja runs every job in a process group of its own and ends those groups when it is told to
# stop, which a SIGKILL of ninja's group does not let it do (the compilers ran on, orphaned,
# writing into the build tree). Then, after at most STOP_GRACE_S, SIGKILL to the leader's group.
STOP_GRACE_S = 10
GUARD = ('read -r word; [ "$word" = done ] && exit 0; kill -TERM "$1" 2>/dev/null; i=0; '
         f'while kill -0 "$1" 2>/dev/null && [ $i -lt {STOP_GRACE_S * 10} ]; do sleep 0.1; '
         'i=$((i+1)); done; kill -9 -"$1" 2>/dev/null; exit 0')  # dash: no --


def _start_guard(pgid: int) -> tuple[subprocess.Popen, IO[str]]:
    guard = subprocess.Popen(["/bin/sh", "-c", GUARD, "orch-guard", str(pgid)],
                             stdin=subprocess.PIPE, text=True, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert guard.stdin is not None
    return guard, guard.stdin


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _stop(proc: subprocess.Popen) -> None:
    """As the guard does: SIGTERM to the leader (ninja ends its jobs' groups), then SIGKILL
    to its group."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_GRACE_S)
    _kill_group(proc.pid)


def run_logged(cmd: Sequence[str | Path], *, env: dict[str, str], log: Path, title: str,
               cwd: Path | None = None) -> None:
    """Run cmd, append all output to log, show ninja progress (a terminal only); print the
    step's phase line with its time; raise BuildFailed on error."""
    argv = [str(c) for c in cmd]
    tail: deque[str] = deque(maxlen=25)
    start = time.monotonic()
    progress = build_progress(title)
    width = label_width()
    with open(log, "a") as logf, progress or contextlib.nullcontext():
        logf.write(f"$ {' '.join(argv)}\n")
        logf.flush()
        task = progress.add_task("", total=None) if progress is not None else None
        try:  # its own process group (same session): ninja and its compilers, killed together
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, errors="replace",
                                    process_group=0)
        except OSError as e:
            raise UserError(f"{title}: cannot run {argv[0]} ({e.strerror}); if it belongs to "
                            "the toolchain, `doit verify toolchain=1` names what changed") from None
        assert proc.stdout is not None
        guard, guard_in = _start_guard(proc.pid)
        try:
            for line in proc.stdout:
                logf.write(line)
                tail.append(line.rstrip("\n"))
                m = NINJA_STATUS_RE.match(line)
                if m and progress is not None and task is not None:
                    done, total = int(m[1]), int(m[2])
                    progress.update(task, completed=done, total=total,
                                    description=clip_end(line[m.end():].strip(), width))
            rc = proc.wait()
        except BaseException:
            _stop(proc)
            proc.wait()
            raise
        finally:
            _kill_group(proc.pid)  # leftovers of a finished step too (none in a clean build)
            try:
                guard_in.write("done\n")
                guard_in.close()
            except OSError:
                pass
            guard.wait()
    if rc != 0:
        shown = "\n".join(tail)
        raise BuildFailed(f"{title} failed (exit {rc}); full log: {log}", report=shown)
    print_phase(title, time.monotonic() - start)
