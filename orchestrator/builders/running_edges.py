"""What ninja is running right now, read from /proc: the commands its children run, named by
their output (`-o X`, as ninja's own "Building CXX object X" names them).

Off a smart terminal ninja prints an edge's `[N/M] description` only when the edge ends, so
while one long compile runs the build's bar has nothing to show; the bar asks this instead
(builders/process.py)."""
from __future__ import annotations

import os
import shlex


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process (one pass over /proc)."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue  # gone meanwhile
        fields = stat.rsplit(")", 1)[-1].split()  # after "(comm)", which may hold spaces
        if len(fields) > 1 and fields[1].isdigit():
            out[int(name)] = int(fields[1])
    return out


def _children(pid: int, parents: dict[int, int] | None = None) -> list[int]:
    """The processes whose parent is pid."""
    table = _parents() if parents is None else parents
    return sorted(p for p, parent in table.items() if parent == pid)


def edge_name(argv: list[str]) -> str:
    """A running command's name: its `-o` output, else the command cut short."""
    return _output_of(argv) or " ".join(_words(argv))[:120]


def _words(argv: list[str]) -> list[str]:
    if len(argv) >= 3 and argv[0].endswith("sh") and argv[1] == "-c":  # ninja's /bin/sh -c CMD
        try:
            return shlex.split(argv[2])
        except ValueError:
            return argv[2].split()
    return argv


def _output_of(argv: list[str]) -> str | None:
    words = _words(argv)
    return next((words[i + 1] for i, w in enumerate(words[:-1]) if w == "-o"), None)


def running_edges(ninja_pid: int, depth: int = 6) -> list[str]:
    """The names of the commands ninja (pid) runs now, oldest child first. A child that is
    not a compile (no `-o`) is looked through, `depth` levels down: under setuptools or a
    PEP 517 backend, pip runs the backend, which runs ninja (or the compilers), whose
    compiles are what the bar names (issue 33).

    A child that has forked but not yet exec'd still shows its parent's command line (ninja
    -j1 for a moment, longer on a loaded machine): it runs nothing yet and is left out."""
    return _edges(ninja_pid, _cmdline(ninja_pid), depth, _parents())


def _cmdline(pid: int) -> list[str] | None:
    """pid's argv, None if it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return None


def _edges(pid: int, own: list[str] | None, depth: int, parents: dict[int, int]) -> list[str]:
    names = []
    for child in _children(pid, parents):
        argv = _cmdline(child)
        if not argv or argv == own:  # gone, a zombie, or a fork that has not exec'd yet
            continue
        deeper = (_edges(child, argv, depth - 1, parents)
                  if depth > 0 and _output_of(argv) is None else [])
        names += deeper or [edge_name(argv)]
    return names
