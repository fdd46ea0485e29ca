"""`doit run variant=X -- CMD ...` (or id=): CMD in one artifact's own environment
(orchestrator.bench.environment), without switching the workspace; the artifact is realised
first as `doit switch` would. The command replaces this process: its exit status is ours."""
from __future__ import annotations

import os

from orchestrator.bench.environment import artifact_env
from orchestrator.bench.sides import run_side
from orchestrator.config.command_line import command_after_dashes
from orchestrator.config.settings import Settings
from orchestrator.console import console
from orchestrator.errors import UserError
from orchestrator.store.artifacts import Store


def cmd_run(settings: Settings, words: list[str]) -> None:
    command = command_after_dashes(words)
    if not command:
        raise UserError("run: give the command after --, e.g. doit run variant=release -- "
                        "python -c 'import demo; print(demo.build_type())'")
    side = run_side(settings, Store(settings.store_root))
    env = artifact_env(side, dict(os.environ))
    console.print(f"run: {side.name}", markup=False, soft_wrap=True)
    console.file.flush()
    try:
        os.execvpe(command[0], command, env)
    except OSError as e:
        raise UserError(f"run: cannot run {command[0]!r} in {side.name}'s environment: "
                        f"{e.strerror}; is it on the artifact's PATH?") from None
