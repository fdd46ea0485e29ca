"""Run a build step with its output in the build log and ninja's [N/M] as a progress bar."""
from __future__ import annotations

import contextlib
import re
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from orchestrator.builders.running_edges import running_edges
from orchestrator.console import build_progress, clip_end, label_width, print_phase
from orchestrator.errors import CheckFailed, UserError, is_no_space, no_space
from orchestrator.process_group import Step, spawn

NINJA_STATUS_RE = re.compile(r"^\s*\[(\d+)/(\d+)\] ")  # pip -v indents a backend's ninja
NINJA_STATUS = "[%f/%t] "


# What pip -v and the build backends print before the first compile (and between them): the
# bar's label names the part that runs, as the running compile names a compile's.
PHASE_LINES = (
    (re.compile(r"^\s*Preparing metadata \((\S+)\): started"), "preparing metadata ({})"),
    (re.compile(r"^\s*Building wheel for (\S+) \(\S+\): started"), "building the wheel of {}"),
    (re.compile(r"^\s*running (\w+)\s*$"), "setup.py: {}"),                # setuptools' commands
    (re.compile(r"^\s*\*\*\* ([A-Za-z].*?)\.*\s*$"), "{}"),                 # scikit-build-core's
    (re.compile(r"^\s*Emitting ninja build file"), "cpp_extension: writing build.ninja"),
    (re.compile(r"^\s*Created wheel for (\S+):"), "wheel of {} made"),
)


def phase_label(line: str) -> str | None:
    """The label a build backend's progress line gives, or None for any other line."""
    for pattern, label in PHASE_LINES:
        m = pattern.match(line)
        if m:
            return label.format(*m.groups())
    return None


def short_path(name: str) -> str:
    """An absolute output path (cpp_extension's) as its last three components."""
    return "/".join(name.split("/")[-3:]) if name.startswith("/") else name


def step_label(text: str) -> str:
    """A status line's text: a bare compile command (ninja's edge without a description, as
    cpp_extension writes them) is named by its output."""
    words = text.split()
    if "-o" in words[:-1] and "-c" in words:
        return short_path(words[words.index("-o") + 1])
    return text.strip()


class BuildFailed(CheckFailed):
    """A configure/compile/install step exited non-zero."""


def run_logged(cmd: Sequence[str | Path], *, env: dict[str, str], log: Path, title: str,
               cwd: Path | None = None,
               adopted: tuple[Step, Iterable[str], float] | None = None) -> None:
    """Run cmd, append all output to log, show ninja progress (a terminal only); print the
    step's phase line with its time; raise BuildFailed on error. `adopted`: cmd is already
    running (a head start, see head_start.py): its step, the lines it printed and prints, and
    when it started (time.monotonic)."""
    argv = [str(c) for c in cmd]
    tail: deque[str] = deque(maxlen=25)
    start = time.monotonic() if adopted is None else adopted[2]
    progress = build_progress(title)
    width = label_width()
    with open(log, "a") as logf, progress or contextlib.nullcontext():
        logf.write(f"$ {' '.join(argv)}\n")
        logf.flush()
        task = progress.add_task("", total=None) if progress is not None else None
        if adopted is not None:
            step, lines, _ = adopted
        else:
            try:  # its own process group: ninja and its compilers, killed together
                step = spawn(argv, env, str(cwd) if cwd is not None else None)
            except OSError as e:
                raise UserError(f"{title}: cannot run {argv[0]} ({e.strerror}); if it belongs "
                                "to the toolchain, `doit verify toolchain=1` names what "
                                "changed") from None
            assert step.proc.stdout is not None
            lines = step.proc.stdout
        last = [time.monotonic()]  # when ninja last printed a status line
        ticker = None if progress is None or task is None else \
            RunningNames(progress, task, step.proc.pid, last, width)
        try:
            if ticker is not None:
                ticker.start()
            for line in lines:
                logf.write(line)
                tail.append(line.rstrip("\n"))
                m = NINJA_STATUS_RE.match(line)
                if m and progress is not None and task is not None:
                    last[0] = time.monotonic()
                    done, total = int(m[1]), int(m[2])
                    progress.update(task, completed=done, total=total,
                                    description=clip_end(step_label(line[m.end():]), width))
                elif progress is not None and task is not None \
                        and (phase := phase_label(line)) is not None:
                    progress.update(task, description=clip_end(phase, width))
            rc = step.proc.wait()
        except BaseException:
            step.stop()
            step.proc.wait()
            raise
        finally:
            if ticker is not None:
                ticker.stop()
            step.release()
    if rc != 0:
        shown = "\n".join(tail)
        if is_no_space(shown):  # a compiler or linker could not write: one line, exit 2
            raise no_space(cwd or log.parent)
        raise BuildFailed(f"{title} failed (exit {rc}); full log: {log}", report=shown)
    print_phase(title, time.monotonic() - start, "" if adopted is None else
                "started ahead of the plan (head start)")


class RunningNames(threading.Thread):
    """While ninja prints nothing for IDLE_S (one long compile), the bar's label names what
    runs (`running: ops/.../add_kernel.cpp.o (53s)`), refreshed every second."""

    IDLE_S = 2.0

    def __init__(self, progress: Any, task: Any, pid: int, last: list[float], width: int) -> None:
        super().__init__(daemon=True)
        self.progress, self.task, self.pid, self.last, self.width = progress, task, pid, last, width
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(1.0):
            idle = time.monotonic() - self.last[0]
            if idle < self.IDLE_S:
                continue
            names = running_edges(self.pid)
            if names:
                label = f"running: {', '.join(map(short_path, names))} ({idle:.0f}s)"
                self.progress.update(self.task, description=clip_end(label, self.width))

    def stop(self) -> None:
        self.done.set()
        self.join()
