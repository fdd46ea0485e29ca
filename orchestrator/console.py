"""The one rich console every module prints through (stderr, so JSON on stdout stays clean),
and the shapes of long work on it: a phase line with its time, a fixed-width progress bar
for counted steps, a byte progress bar for transfers.

On a terminal a phase shows a spinner (or ninja's bar) while it runs; piped, nothing live is
drawn (no blank lines), only the one line per phase when it ends."""
from __future__ import annotations

import contextlib
import os
import time
from typing import TYPE_CHECKING, Iterator

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
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn)
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


class ByteProgress:
    """A bar in bytes with bytes/s and time left, for downloads and uploads; drawn only on a
    terminal and not under ORCH_NO_PROGRESS=1, gone when done. advance() is thread-safe.
    `label` may hold rich markup; `total` None when the size is not known."""

    def __init__(self, label: str, total: int | None) -> None:
        from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn,
                                   TimeRemainingColumn, TransferSpeedColumn)

        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                                 TransferSpeedColumn(), TimeRemainingColumn(),
                                 console=console, transient=True,
                                 disable=not console.is_terminal
                                 or bool(os.environ.get("ORCH_NO_PROGRESS")))
        self.task = self.progress.add_task(label, total=total)

    def __enter__(self) -> "ByteProgress":
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
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
