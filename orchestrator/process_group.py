"""A build step's process: its own process group, and a guard that stops it when this
process dies (even by SIGKILL). Import-light: the fast path's head start uses it too."""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
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


# The step's leader, a small interpreter of its own (python -I -S): a child subreaper
# (PR_SET_CHILD_SUBREAPER) that runs argv, forwards SIGTERM, SIGINT and SIGHUP to it, and once
# it ended waits (at most LINGER_S; not when told to stop) for the processes it left behind in
# this session, so that their CPU time and memory reach RUSAGE_CHILDREN (realise/build_usage.py):
# mold links in a forked child that outlives the process gcc waits for. A daemon (a new session: sccache's
# server) is not waited for. Exits as argv did, by its signal too.
LINGER_S = 30
LEADER = r"""
import ctypes, os, signal, sys, time
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
child = 0
stopping = []
def forward(sig, frame):
    stopping.append(sig)  # told to stop: no waiting for what the step left behind
    if child > 0:
        try:
            os.kill(child, sig)
        except ProcessLookupError:
            pass
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, forward)
child = os.fork()
if child == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    except OSError as e:
        os.write(2, f"{sys.argv[2]}: {e.strerror}\n".encode())
    os._exit(127)
while True:
    pid, status = os.waitpid(-1, 0)
    if pid == child:
        child = -1  # reaped: its pid may be another process's now
        break
def left_behind():
    own, sid = os.getpid(), os.getsid(0)
    try:
        with open(f"/proc/{own}/task/{own}/children") as f:
            kids = [int(k) for k in f.read().split()]
    except OSError:
        kids = []
    found = []
    for k in kids:
        try:
            if os.getsid(k) == sid:
                found.append(k)
        except OSError:
            pass
    return found
deadline = time.monotonic() + float(sys.argv[1])
while not stopping and time.monotonic() < deadline:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        break
    if not left_behind():
        break
    time.sleep(0.005)
if os.WIFSIGNALED(status):
    signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    os.kill(os.getpid(), os.WTERMSIG(status))
os._exit(os.waitstatus_to_exitcode(status))
"""


def runnable(argv0: str, env: Mapping[str, str]) -> None:
    """OSError (as exec would raise it) when argv0 cannot run: the leader starts anyway."""
    found = shutil.which(argv0, path=env.get("PATH", os.defpath)) if "/" not in argv0 \
        else argv0 if os.path.isfile(argv0) and os.access(argv0, os.X_OK) else None
    if found is None:
        if "/" in argv0 and os.path.isfile(argv0):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), argv0)
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), argv0)


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
    """argv in a process group of its own (same session), under its leader (LEADER), guarded.
    OSError if it cannot run."""
    runnable(argv[0], env)
    if cwd is not None and not os.path.isdir(cwd):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), cwd)
    leader = [sys.executable, "-I", "-S", "-c", LEADER, str(LINGER_S), *argv]
    proc = subprocess.Popen(leader, cwd=cwd, env=dict(env), stdout=subprocess.PIPE,
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
