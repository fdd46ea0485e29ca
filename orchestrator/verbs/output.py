"""The one way a verb prints its result: format=json writes one JSON document on stdout,
anything else prints the human text on the console (stderr).

The JSON is one line with sorted keys, so a caller may read either the whole of stdout or its
last line."""
from __future__ import annotations

import json
import sys
from typing import Any

from orchestrator.console import console
from orchestrator.settings import Settings


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
