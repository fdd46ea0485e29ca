"""What `doit build` and `doit switch` answer: the JSON object and the human line, made in
one place for the verbs (verbs.build, verbs.switch) and for the fast path (cli.fast_path),
which answers a repeated no-op before doit loads a task. This module imports nothing, so the
fast path stays free of rich and pydantic; `write_plain` is the fast path's sink, the verbs'
is verbs.output.emit (the same bytes: the line is printed without markup either way)."""
from __future__ import annotations

import json
import sys
from typing import Any

Reply = tuple[dict[str, Any], str]


def build_reply(recipe: str, variant: str, artifact_id: str, path: str, origin: str,
                seconds: float) -> Reply:
    """`<recipe> <variant> <id>: <origin> → <path>`; a present artifact says `up to date`
    and how long the answer took."""
    line = f"{recipe} {variant} {artifact_id}: {origin} → {path}"
    human = f"up to date: {line} ({seconds:.2f}s)" if origin == "present" else line
    return {"id": artifact_id, "path": path, "origin": origin, "recipe": recipe,
            "variant": variant}, human


def switch_reply(workspace: str, generation: int, changed: bool, recipe: str, variant: str,
                 artifact_id: str, path: str, origin: str) -> Reply:
    state = "switched" if changed else "already active"
    return ({"generation": generation, "changed": changed, "path": path, "id": artifact_id,
             "origin": origin},
            f"{state}: {workspace} generation {generation} → {recipe} {variant} {artifact_id} "
            f"({origin})")


def write_plain(reply: Reply, json_format: bool) -> None:
    """The reply as emit writes it (one key-sorted JSON line on stdout, or the human line on
    stderr), without the console."""
    data, human = reply
    if json_format:
        sys.stdout.write(json.dumps(data, sort_keys=True) + "\n")
    else:
        sys.stderr.write(human + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
