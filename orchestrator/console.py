"""The one rich console every module prints through (stderr, so JSON on stdout stays clean),
and the shapes of long work on it: a phase line with its time, a fixed-width progress bar
for counted steps, a byte progress bar for transfers.

On a terminal a phase shows a spinner (or ninja's bar) while it runs; piped, nothing live is
drawn (no blank lines), only the one line per phase when it ends."""
from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

from rich.console import Console

if TYPE_CHECKING:  # rich.progress is imported where a bar is drawn: every start would pay it
    from rich.progress import Progress

console = Console(stderr=True, highlight=False, soft_wrap=True)

PHASE_WIDTH = 10   # "configure", "build", "install", "verify", "commit", ...
BAR_WIDTH = 24
COUNT_WIDTH = 11   # "12345/12345"
LABEL_MAX = 60


def clip_end(text: str, width: int) -> str:
    """text cut at its END to width characters (an ellipsis marks the cut)."""
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: width - 1] + "…"


def label_width(total_width: int | None = None) -> int:
    """The progress label's fixed width: what the terminal leaves after the fixed columns."""
    fixed = PHASE_WIDTH + 1 + BAR_WIDTH + 1 + COUNT_WIDTH + 1 + 7 + 1
    return max(0, min(LABEL_MAX, (total_width or console.width) - fixed - 1))


def phase_line(name: str, seconds: float, ok: bool = True) -> str:
    mark = "[green]✓[/]" if ok else "[red]✗[/]"
    return f"{mark} {name:<{PHASE_WIDTH}}{seconds:>8.1f}s"


def print_phase(name: str, seconds: float, note: str = "", ok: bool = True) -> None:
    """The one line a finished phase leaves: `✓ build        12.3s` (`✗` when it failed)."""
    console.print(phase_line(name, seconds, ok) + (f"  [dim]{note}[/]" if note else ""),
                  soft_wrap=True)


class Outcome:
    """What a phase's body says of itself: `failed = True` marks its line with ✗."""

    failed: bool = False


def print_total(seconds: float, what: str = "total") -> None:
    console.print(f"  {what:<{PHASE_WIDTH}}{seconds:>8.1f}s", soft_wrap=True)


def build_progress(title: str, on: Console | None = None) -> Progress | None:
    """ninja's [N/M] as a bar of fixed width (label cut at its end); None when not a terminal."""
    on = on or console
    if not on.is_terminal:
        return None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Column

    return Progress(
        TextColumn(f"[bold]{clip_end(title, PHASE_WIDTH)}",
                   table_column=Column(width=PHASE_WIDTH, no_wrap=True)),
        BarColumn(bar_width=BAR_WIDTH),
        MofNCompleteColumn(table_column=Column(width=COUNT_WIDTH, justify="right", no_wrap=True)),
        TimeElapsedColumn(table_column=Column(width=7, no_wrap=True)),
        TextColumn("{task.description}", markup=False,
                   table_column=Column(width=label_width(on.width), no_wrap=True,
                                       overflow="crop")),
        console=on, transient=True, expand=False)


FIRST_NOTE_S = 2.0    # an operation says nothing until it has run this long
NOTE_EVERY_S = 10.0   # then, off a terminal, one line this often


def progress_off() -> bool:
    return bool(os.environ.get("ORCH_NO_PROGRESS"))


class Heartbeat:
    """Off a terminal, a line `label: <what text() says> (Ns)` after FIRST_NOTE_S and then
    every NOTE_EVERY_S while the block runs: a log shows a long operation is alive."""

    def __init__(self, label: str, text: Callable[[], str], on: Console,
                 first: float = FIRST_NOTE_S, every: float = NOTE_EVERY_S) -> None:
        self.label, self.text, self.on, self.first, self.every = label, text, on, first, every
        self.done = threading.Event()
        self.start = time.monotonic()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        wait = self.first
        while not self.done.wait(wait):
            what = self.text()
            self.on.print(f"{self.label}: {what + ' ' if what else ''}"
                          f"({time.monotonic() - self.start:.0f}s)", soft_wrap=True)
            wait = self.every

    def __enter__(self) -> Heartbeat:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()


@contextlib.contextmanager
def working(label: str, on: Console | None = None, first: float = FIRST_NOTE_S,
            every: float = NOTE_EVERY_S) -> Iterator[None]:
    """A long operation without a count (lock resolution, gc's deletions): a spinner with
    its time on a terminal, heartbeat lines off one; when it went well and ran FIRST_NOTE_S
    or longer, its ✓ line with the time (when it raised, the error speaks: never a ✓).
    Nothing at all under ORCH_NO_PROGRESS=1."""
    on = on or console
    start = time.monotonic()
    ok = False
    try:
        if progress_off():
            yield
        elif on.is_terminal:
            with on.status(label):
                yield
        else:
            with Heartbeat(label, lambda: "still working", on, first, every):
                yield
        ok = True
    finally:
        took = time.monotonic() - start
        if ok and took >= first and not progress_off():
            on.print(f"[green]✓[/] {label} [dim]({took:.1f}s)[/]", soft_wrap=True)


class Meter(Protocol):
    """What moves a byte bar: ByteProgress, or a forked pull worker's pipe to its parent's."""

    def advance(self, amount: int) -> None:
        ...


class ByteProgress:
    """A bar in bytes with bytes/s and time left, for downloads and uploads, on a terminal;
    off one, heartbeat lines (`label: 312.0 of 909.1 MB, 45.1 MB/s (12s)`); neither under
    ORCH_NO_PROGRESS=1. The bar is gone when done. advance() is thread-safe. `label` may
    hold rich markup; `total` None when the size is not known."""

    def __init__(self, label: str, total: int | None, on: Console | None = None,
                 first: float = FIRST_NOTE_S, every: float = NOTE_EVERY_S) -> None:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        on = on or console
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                                 TransferSpeedColumn(), TimeRemainingColumn(),
                                 console=on, transient=True,
                                 disable=not on.is_terminal or progress_off())
        self.task = self.progress.add_task(label, total=total)
        self.total = total
        self.heartbeat = None if on.is_terminal or progress_off() else \
            Heartbeat(label, self._so_far, on, first, every)

    def _so_far(self) -> str:
        task = self.progress.tasks[0]
        done = f"{task.completed / 1e6:.1f}" + (f" of {self.total / 1e6:.1f}" if self.total else "")
        speed = task.completed / 1e6 / max(time.monotonic() - self.heartbeat.start, 1e-3) \
            if self.heartbeat else 0.0
        return f"{done} MB, {speed:.1f} MB/s"

    def __enter__(self) -> ByteProgress:
        self.progress.start()
        if self.heartbeat is not None:
            self.heartbeat.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.heartbeat is not None:
            self.heartbeat.__exit__()
        self.progress.stop()

    def advance(self, n: int) -> None:
        self.progress.advance(self.task, n)


@contextlib.contextmanager
def phase(name: str, note: str = "") -> Iterator[Outcome]:
    """A named phase: a spinner on a terminal while it runs, then its line with the time:
    `✓` when it went well, `✗` when it raised or set the yielded Outcome's `failed`."""
    start = time.monotonic()
    outcome = Outcome()
    try:
        if console.is_terminal:
            with console.status(f"{name} {note}".strip()):
                yield outcome
        else:
            yield outcome
    except BaseException:
        outcome.failed = True
        raise
    finally:
        print_phase(name, time.monotonic() - start, note, ok=not outcome.failed)


@contextlib.contextmanager
def step(title: str) -> Iterator[None]:
    """Show a spinner while a long step runs, then its duration (✗ when it raised)."""
    start = time.monotonic()
    ok = False
    try:
        if console.is_terminal:
            with console.status(title):
                yield
        else:
            yield
        ok = True
    finally:
        mark = "[green]✓[/]" if ok else "[red]✗[/]"
        console.print(f"{mark} {title} [dim]({time.monotonic() - start:.1f}s)[/]")
