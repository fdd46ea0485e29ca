"""The one rich console every module prints through (stderr, so JSON on stdout stays clean)."""
from __future__ import annotations

import contextlib
import time
from typing import Iterator

from rich.console import Console

console = Console(stderr=True, highlight=False, soft_wrap=True)


@contextlib.contextmanager
def step(title: str) -> Iterator[None]:
    """Show a spinner while a long step runs, then its duration."""
    start = time.monotonic()
    with console.status(title):
        yield
    console.print(f"[green]✓[/] {title} [dim]({time.monotonic() - start:.1f}s)[/]")
