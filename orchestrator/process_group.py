"""A build step's process: its own process group, and a guard that stops it when this
process dies (even by SIGKILL). Import-light: the fast path's head start uses it too."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO

# Stops the build when our end of its stdin closes without "done": that is, when this process
# dies, even by SIGKILL (the kernel closes the pipe for us). First SIGTERM to the step's leader:
# ninja runs every job in a process group of its own and ends those groups when it is told to
# stop, which a SIGKILL of ninja's group does not let it do (the compilers ran on, orphaned,
# writing into the build tree). Then, after at most STOP_GRACE_S, SIGKILL to the leader's group.
STOP_GRACE_S = 10
GUARD = ('read -r word; [ "$word" = done ] && exit 0; kill -TERM "$1" 2>/dev/null; i=0; '
         f'while kill -0 "$1" 2>/dev/null && [ $i -lt {STOP_GRACE_S * 10} ]; do sleep 0.1; '
         'i=$((i+1)); done; kill -9 -"$1" 2>/dev/null; exit 0')  # dash: no --


@dataclass
class Step:
    """A running step: its process (stdout a text pipe, stderr merged) and its guard."""
    proc: subprocess.Popen
    guard: subprocess.Popen
    guard_in: IO[str]

    def stop(self) -> None:
        """As the guard does: SIGTERM to the leader (ninja ends its jobs' groups), then
        SIGKILL to its group."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=STOP_GRACE_S)
        kill_group(self.proc.pid)

    def release(self) -> None:
        """The step is over: kill what is left of its group, and let the guard go."""
        kill_group(self.proc.pid)  # leftovers of a finished step too (none in a clean build)
        try:
            self.guard_in.write("done\n")
            self.guard_in.close()
        except OSError:
            pass
        self.guard.wait()


def spawn(argv: Sequence[str], env: Mapping[str, str], cwd: str | None = None) -> Step:
    """argv in a process group of its own (same session), guarded. OSError if it cannot run."""
    proc = subprocess.Popen(list(argv), cwd=cwd, env=dict(env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace",
                            process_group=0)
    guard = subprocess.Popen(["/bin/sh", "-c", GUARD, "orch-guard", str(proc.pid)],
                             stdin=subprocess.PIPE, text=True, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert guard.stdin is not None
    return Step(proc, guard, guard.stdin)


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
