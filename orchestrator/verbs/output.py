"""The one way a verb prints its result: format=json writes one JSON document on stdout,
anything else prints the human text on the console (stderr).

The JSON is one line with sorted keys, so a caller may read either the whole of stdout or its
last line."""
from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from orchestrator.config.settings import Settings
from orchestrator.console import console

if TYPE_CHECKING:  # rich.table is imported where a table is drawn
    from rich.table import Table


def json_line(data: Any) -> str:
    """data as the one-line, key-sorted JSON every verb prints."""
    return json.dumps(data, sort_keys=True)


def print_json(data: Any) -> None:
    """data on stdout as one JSON line (for verbs that speak on the console either way)."""
    sys.stdout.write(json_line(data) + "\n")
    sys.stdout.flush()


def emit(settings: Settings, data: Any, human: str | None = None, *, markup: bool = True) -> None:
    """JSON on stdout for format=json; otherwise `human` (if any) on the console."""
    if settings.fmt == "json":
        print_json(data)
    elif human is not None:
        console.print(human, markup=markup)


def mb(n: int) -> str:
    """Bytes as the megabytes (one decimal) the human reports show."""
    return f"{n / 1e6:.1f}"


ID_WIDTH = 12  # an artifact id in a table: 12 hex digits (format=json keeps all 40)


def short_name(name: str) -> str:
    """A store entry's name `<40 hex>-recipe-variant` with its id cut to ID_WIDTH digits."""
    head, sep, rest = name.partition("-")
    if len(head) == 40 and all(c in "0123456789abcdef" for c in head):
        return head[:ID_WIDTH] + sep + rest
    return name


def fitted_table(columns: tuple[str, ...], rows: list[tuple[str, ...]],
                 elastic: tuple[str, ...] = ()) -> Table:
    """A borderless table whose cells never wrap: ids and dates keep their full width; only
    the `elastic` columns give way (cut with an ellipsis) when the console is narrow."""
    from rich.table import Table
    from rich.text import Text

    table = Table(show_edge=False, box=None, pad_edge=False, padding=(0, 1, 0, 0))
    for i, col in enumerate(columns):
        if col in elastic:  # wrapable for rich's width sharing; each cell stays one line
            table.add_column(col, no_wrap=False)
        else:
            table.add_column(col, no_wrap=True,
                             width=max([len(col), *(len(r[i]) for r in rows)]))
    for r in rows:
        table.add_row(*(Text(c, no_wrap=True, overflow="ellipsis") for c in r))
    return table
