"""The head start of an edited tree's build: ninja started by the fast path, before doit
loads a task and the planner runs, and adopted by the build when the planner asks for that
very ninja; stopped, and what it built removed, when it does not.

The edit → build loop is ninja plus the planner's start-up (imports, plan, toolchain check):
on 2 cores the two overlap. `fast_path.answer` starts it when a `doit build` / `doit switch`
has a memo (plan_memo.py) whose every input other than the source tree holds, and whose
last build ran ninja in a CMake tree with no shared state outside it (compile cache off or a
local ccache: no sccache server, no remote, no distcc). The tree keeps what that ninja was
(`note`, SPEC): its argv, its whole environment, and the stat of the programs it runs; the
memo names the tree.

It holds the build tree's lock from the start, so no other build runs in that tree meanwhile,
and `realise.build` takes the same lock object (`held`); so it does every other lock the
builder named in the spec (PyTorch's: its checkout's source lock, since its codegen writes
into the checkout). `cmake_steps.compile_` adopts it
(`adopting`) only when its argv and environment are the ones ninja would be run with now;
anything else — a configure step to run first, another build tree, an artifact found
present, a drifted toolchain, an error — stops it and deletes the outputs it built (the
entries it appended to .ninja_log), so the tree holds nothing the full command did not check.
A SIGKILL of this process stops ninja through its guard (process_group.py).
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from orchestrator.fs import write_atomic
from orchestrator.memo.file_reads import stat_sig
from orchestrator.memo.state import STATE
from orchestrator.process_group import Step, spawn

NINJA_LOG = ".ninja_log"
SPEC = ".orch-head-start.json"  # in the build tree: the ninja its last build ran
# The caller's variables a build's environment takes as they are (Toolchain.build_env): a
# memo's key leaves them out, so a head start takes them from this process too.
FROM_CALLER = ("TERM",)


@dataclass
class Started:
    build_dir: Path
    argv: list[str]
    env: dict[str, str]
    before: int                   # .ninja_log's size when ninja started
    step: Step
    locks: list[Any]              # the build tree's FileLock, then the spec's others: held
    lines: queue.Queue[str | None]
    t0: float                     # time.monotonic() when ninja started
    taken: bool = False

    def output(self) -> Iterator[str]:
        """What ninja printed and prints, to its end."""
        while (line := self.lines.get()) is not None:
            yield line




def remember_ninja(build_dir: Path, argv: list[str], env: dict[str, str], programs: list[Path],
         stats_log: Path | None, locks: tuple[Path, ...] = ()) -> None:
    """This build's ninja may be started ahead next time: kept in its tree (SPEC), which the
    memo of any command that plans this tree names. `locks`: lock files of the store's
    locks/ the builder holds around ninja besides the build tree's (a head start takes them
    too, in this order, after the tree's)."""
    sigs = [[str(p), stat_sig(str(p))] for p in programs]
    spec = {"build_dir": str(build_dir), "argv": argv, "env": env, "programs": sigs,
            "stats_log": None if stats_log is None else str(stats_log),
            "locks": [str(p) for p in locks]}
    with contextlib.suppress(OSError):
        if any(sig is None for _, sig in sigs):
            (build_dir / SPEC).unlink(missing_ok=True)
        else:
            write_atomic(build_dir / SPEC, json.dumps(spec), durable=False)


def forget(build_dir: Path) -> None:
    """This build's ninja may not be started ahead (its compile cache shares state): the
    tree's spec from an earlier build goes."""
    with contextlib.suppress(OSError):
        (build_dir / SPEC).unlink(missing_ok=True)


def spec_in(tree: Path) -> Any:
    """The spec `note` kept in this tree (None: none, or not JSON)."""
    try:
        return json.loads((tree / SPEC).read_bytes())
    except (OSError, ValueError):
        return None


def _valid(spec: Any, build_root: Path, want: Path, locks_dir: Path) -> bool:
    """A spec of the shape `note` writes, naming a tree of this store and locks of its
    locks/, whose programs are as they were."""
    if not isinstance(spec, dict):
        return False
    argv, env, programs = spec.get("argv"), spec.get("env"), spec.get("programs")
    build_dir = spec.get("build_dir")
    if not (isinstance(build_dir, str) and isinstance(argv, list) and len(argv) > 3
            and all(isinstance(a, str) for a in argv) and isinstance(env, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
            and isinstance(programs, list) and programs):
        return False
    tree = Path(build_dir)
    if tree.parent != build_root or tree != Path(want) or not (tree / "build.ninja").is_file() \
            or argv[1:3] != ["-C", build_dir]:
        return False
    stats = spec.get("stats_log")
    if stats is not None and (not isinstance(stats, str) or Path(stats).parent != tree):
        return False
    if [p for p, _ in programs][:1] != argv[:1]:
        return False  # the first program is the one run
    locks = spec.get("locks", [])
    if not isinstance(locks, list) or not all(
            isinstance(p, str) and Path(p).parent == locks_dir and p.endswith(".lock")
            and Path(p).name != f"build-{tree.name}.lock" for p in locks):
        return False
    return all(isinstance(p, str) and stat_sig(p) == sig for p, sig in programs)


def start(tree: Path, build_root: Path, locks_dir: Path) -> bool:
    """Start the ninja `note` kept in `tree` (a tree of build_root) ahead of the planner
    (False: not started)."""
    spec = spec_in(tree)
    if STATE.head_start is not None or not _valid(spec, build_root, tree, locks_dir):
        return False
    from filelock import FileLock, Timeout

    held: list[Any] = []
    for path in [str(locks_dir / f"build-{tree.name}.lock"), *spec.get("locks", [])]:
        lock = FileLock(path, timeout=0)  # the objects realise.build and the builder re-enter
        try:
            lock.acquire()
        except (Timeout, OSError):
            _release(held)
            return False  # another build holds it: the full command waits for it
        held.append(lock)
    env = {k: v for k, v in spec["env"].items() if k not in FROM_CALLER}
    env.update({k: os.environ[k] for k in FROM_CALLER if k in os.environ})
    try:
        log = tree / NINJA_LOG
        before = log.stat().st_size if log.is_file() else 0
        if spec["stats_log"] is not None:
            Path(spec["stats_log"]).unlink(missing_ok=True)  # as launcher.begin_stats
        t0 = time.monotonic()
        step = spawn(spec["argv"], env)
    except OSError:
        _release(held)
        return False
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:  # a pipe is 64 KiB: ninja must never wait for the planner
        assert step.proc.stdout is not None
        for line in step.proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, name="head-start", daemon=True).start()
    STATE.head_start = Started(tree, list(spec["argv"]), env, before, step, held, lines, t0)
    atexit.register(stop)
    return True


def running_in(build_dir: Path) -> bool:
    s = STATE.head_start
    return s is not None and not s.taken and s.build_dir == build_dir


def reentrant_lock(lock: Any) -> Any:
    """The head start's lock object when `lock` is the same file (re-entered, not taken
    twice: a second lock on the same file would wait for the first), else `lock`."""
    if STATE.head_start is not None:
        for mine in STATE.head_start.locks:
            if mine.lock_file == lock.lock_file:
                return mine
    return lock


def _release(locks: list[Any]) -> None:
    for lock in reversed(locks):
        lock.release()


class Adoption(NamedTuple):
    ahead: Started | None   # the head start, now the caller's ninja (None: run your own)
    stopped: bool           # a head start of another ninja was stopped (the caller says so)


@contextlib.contextmanager
def adopting(argv: list[str], env: dict[str, str]) -> Iterator[Adoption]:
    """The running head start when it is ninja run as `argv` with `env` (the caller waits
    for it and reads its output); none otherwise, after stopping any other one."""
    s = STATE.head_start
    if s is None:
        yield Adoption(None, False)
        return
    if s.taken or s.argv != argv or s.env != env:
        stop()
        yield Adoption(None, True)
        return
    s.taken = True
    try:
        yield Adoption(s, False)
    finally:
        STATE.head_start = None
        _release(s.locks)


def stop() -> None:
    """Stop a head start nobody adopted, and delete what it built."""
    s, STATE.head_start = STATE.head_start, None
    if s is None or s.taken:
        return
    try:
        s.step.stop()
        s.step.proc.wait()
        s.step.release()
        discard_built(s.build_dir, s.before)
    finally:
        _release(s.locks)


def discard_built(build_dir: Path, offset: int) -> None:
    """Delete the outputs of the .ninja_log entries after `offset` (all of them when ninja
    rewrote its log shorter meanwhile): the next ninja builds them again."""
    try:
        data = (build_dir / NINJA_LOG).read_bytes()
    except OSError:
        return
    header, _, entries = data.partition(b"\n")
    if 0 < offset <= len(data):
        entries = data[offset:]
    for row in entries.decode(errors="replace").splitlines():
        fields = row.split("\t")
        if len(fields) == 5 and not row.startswith("#"):
            out = build_dir / fields[3]
            if out.resolve().is_relative_to(build_dir.resolve()):
                with contextlib.suppress(OSError):
                    out.unlink()
