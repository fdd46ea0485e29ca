"""Glue between doit and the verbs: variables → Settings, errors → exit codes, quiet output.

A UserError becomes a doit TaskError (exit 2) printed as one line; a CheckFailed becomes a
TaskFailed (exit 1) printed with its report. Neither prints a traceback.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from doit import doit_cmd
from doit.exceptions import TaskError, TaskFailed
from doit.reporter import ConsoleReporter
from rich.markup import escape

from orchestrator.console import console
from orchestrator.errors import CheckFailed, UserError
from orchestrator.settings import Settings

REPO_ROOT: Path = Path.cwd()


def configure(repo_root: Path) -> None:
    global REPO_ROOT
    REPO_ROOT = repo_root.absolute()


def current_settings() -> Settings:
    return Settings.from_vars(REPO_ROOT, dict(doit_cmd._CMDLINE_VARS or {}))


def action(verb: Callable[[Settings], object]) -> Callable[[], object]:
    """A doit python-action running verb with the command line's settings."""

    def run() -> object:
        try:
            verb(current_settings())
        except UserError as e:
            console.print(f"[red]error:[/] {escape(str(e))}", soft_wrap=True)
            return TaskError(str(e), report=False)
        except CheckFailed as e:
            console.print(f"[red]failed:[/] {escape(str(e))}", soft_wrap=True)
            if e.report:
                console.print(e.report, soft_wrap=True, markup=False)
            return TaskFailed(str(e), report=False)
        return None

    run.__name__ = verb.__name__
    return run


def task(verb: Callable[[Settings], object], doc: str) -> dict:
    return {"actions": [action(verb)], "doc": doc, "uptodate": [False], "verbosity": 2}


def args_task(verb: Callable[[Settings, list[str]], object], doc: str) -> dict:
    """A task whose verb also gets the command line's positional words (`doit why A B`)."""

    def run(pos: list[str]) -> object:
        return action(lambda settings: verb(settings, list(pos)))()

    run.__name__ = verb.__name__
    return {"actions": [run], "doc": doc, "uptodate": [False], "verbosity": 2, "pos_arg": "pos"}


class QuietReporter(ConsoleReporter):
    """doit's console reporter without the per-task banner (our verbs speak for themselves)."""

    def execute_task(self, task):  # noqa: D102 - doit API
        pass

    def add_failure(self, task, fail):  # noqa: D102
        if fail.report:
            super().add_failure(task, fail)

    def complete_run(self):  # noqa: D102
        if self.failures:
            super().complete_run()


def doit_config(repo_root: Path) -> dict:
    configure(repo_root)
    state = repo_root / ".orch"
    state.mkdir(exist_ok=True)
    return {"reporter": QuietReporter, "backend": "sqlite3",
            "dep_file": str(state / "doit.sqlite3"), "verbosity": 2,
            "default_tasks": ["build"]}
