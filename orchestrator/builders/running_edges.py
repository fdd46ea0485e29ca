"""What ninja is running right now, read from /proc: the commands its children run, named by
their output (`-o X`, as ninja's own "Building CXX object X" names them).

Off a smart terminal ninja prints an edge's `[N/M] description` only when the edge ends, so
while one long compile runs the build's bar has nothing to show; the bar asks this instead
(builders/process.py)."""
from __future__ import annotations

import os
import shlex


def _children(pid: int) -> list[int]:
    """The processes whose parent is pid (one pass over /proc)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue  # gone meanwhile
        fields = stat.rsplit(")", 1)[-1].split()  # after "(comm)", which may hold spaces
        if len(fields) > 1 and fields[1] == str(pid):
            out.append(int(name))
    return sorted(out)


def edge_name(argv: list[str]) -> str:
    """A running command's name: its `-o` output, else the command cut short."""
    words = argv
    if len(argv) >= 3 and argv[0].endswith("sh") and argv[1] == "-c":  # ninja's /bin/sh -c CMD
        try:
            words = shlex.split(argv[2])
        except ValueError:
            words = argv[2].split()
    for i, w in enumerate(words[:-1]):
        if w == "-o":
            return words[i + 1]
    return " ".join(words)[:120]


def running_edges(ninja_pid: int) -> list[str]:
    """The names of the commands ninja (pid) runs now, oldest child first."""
    names = []
    for child in _children(ninja_pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if argv:
            names.append(edge_name(argv))
    return names
