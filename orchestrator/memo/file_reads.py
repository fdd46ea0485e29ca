"""What a piece of work read, for a memo of its answer (see plan_memo): every file it opened
for reading or listed (a `sys.addaudithook` hook), every file the stat caches and the probe
cache consulted instead of reading it, the PATH directories (`shutil.which`), and results
to compute again rather than files (a source tree's digest, a checkout's identity).

A subprocess started while tracing makes the trace unusable (`Trace.unsafe`): what it read
is unknown. A probe answered by the probe cache is keyed by its binary instead
(`untraced()` around the probe). Outside a trace every note is one `is None` test.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from orchestrator.fs import FileSig
from orchestrator.memo.state import STATE

T = TypeVar("T")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def sig_of(st: os.stat_result) -> list[int]:
    """[size, mtime_ns, inode, ctime_ns, mode]: what a trace compares a file by."""
    return [*FileSig.of(st), st.st_mode]


def stat_sig(path: str) -> list[int] | None:
    """`sig_of` what `path` resolves to; None: nothing."""
    try:
        return sig_of(os.stat(path))
    except (OSError, ValueError):
        return None


@dataclass
class Trace:
    skip: frozenset[str] = frozenset()         # paths never noted (pure caches)
    files: dict[str, list[int] | None] = field(default_factory=dict)  # path -> stat_sig
    bins: dict[str, list[Any] | None] = field(default_factory=dict)   # probe key file -> sig
    redo: list[list[Any]] = field(default_factory=list)              # [kind, args, result]
    unsafe: str | None = None
    paused: int = 0

    def note(self, path: str, sig: list[int] | None) -> None:
        if not self.paused and path not in self.files and path not in self.skip:
            self.files[path] = sig


# Results fast_path.redo computed at this command's start, by json.dumps([kind, args]): the
# plan takes each once instead of computing it again (a checkout's identity: git + hashing).


def _audit(event: str, args: tuple[Any, ...]) -> None:
    t = STATE.reading
    if t is None or t.paused:
        return
    if event == "open":
        path, mode, flags = args
        if (mode and any(c in mode for c in "wax+")) or (flags or 0) & _WRITE_FLAGS:
            return
    elif event in ("os.listdir", "os.scandir"):
        path = args[0] if args[0] is not None else "."
    elif event == "subprocess.Popen":
        t.unsafe = t.unsafe or f"ran {args[0]!r}"
        return
    else:
        return
    if isinstance(path, int):
        return
    p = os.path.abspath(os.fsdecode(path))
    if not p.endswith((".py", ".pyc")):  # code: keyed by plan_memo's code fingerprint
        t.note(p, stat_sig(p))


@contextlib.contextmanager
def tracing(skip: frozenset[str] = frozenset()) -> Iterator[Trace]:
    """Trace what the block reads (nested traces are not supported: the inner one wins)."""
    if not STATE.hooked:
        sys.addaudithook(_audit)
        STATE.hooked = True
    t = Trace(skip=skip)
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if d:
            t.note(os.path.abspath(d), stat_sig(d))
    outer, STATE.reading = STATE.reading, t
    try:
        yield t
    finally:
        STATE.reading = outer


@contextlib.contextmanager
def untraced() -> Iterator[None]:
    """Nothing the block reads or runs is traced (its caller notes what keys it instead)."""
    t = STATE.reading
    if t is None:
        yield
        return
    t.paused += 1
    try:
        yield
    finally:
        t.paused -= 1


def note_path(path: os.PathLike[str] | str) -> None:
    """A file whose presence or absence the traced work asked about (stat only)."""
    t = STATE.reading
    if t is not None:
        p = os.path.abspath(path)
        t.note(p, stat_sig(p))


def note_stat(path: str, st: os.stat_result) -> None:
    """A stat cache answered for `path` from this stat (its content was not read)."""
    t = STATE.reading
    if t is not None:
        t.note(os.path.abspath(path), sig_of(st))


def note_binary(file: str, sig: list[Any] | None) -> None:
    """The probe cache answered a question about `file` while it had signature `sig`."""
    t = STATE.reading
    if t is not None and not t.paused:
        t.bins.setdefault(file, sig)


def offer(kind: str, args: list[Any], result: Any) -> None:
    """`recorded(kind, args, ...)` was just computed again (JSON-shaped, as a trace keeps it)
    by the fast path of this very command: the plan's call takes it instead (once)."""
    STATE.offered[json.dumps([kind, args])] = result


def recorded(kind: str, args: list[Any], compute: Callable[[], T]) -> T:
    """compute() untraced, noted as a result to compute again (`fast_path.redo(kind, args)`)
    rather than as the files it read. A result `offer`ed for the same call is taken instead
    of computing it."""
    key = json.dumps([kind, args])
    if key in STATE.offered:
        known = STATE.offered.pop(key)
        compute = lambda: json.loads(json.dumps(known))  # noqa: E731 (a copy: callers may mutate)
    t = STATE.reading
    if t is None or t.paused:
        return compute()
    with untraced():
        result = compute()
    t.redo.append([kind, args, json.loads(json.dumps(result))])
    return result
