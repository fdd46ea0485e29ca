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
    compiles are what the bar names (issue 33)."""
    return _edges(ninja_pid, depth, _parents())


def _edges(pid: int, depth: int, parents: dict[int, int]) -> list[str]:
    names = []
    for child in _children(pid, parents):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if not argv:
            continue
        deeper = _edges(child, depth - 1, parents) if depth > 0 and _output_of(argv) is None else []
        names += deeper or [edge_name(argv)]
    return names
