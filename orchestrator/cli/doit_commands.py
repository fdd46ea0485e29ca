"""doit's `help` and `run` commands as this project answers them, and the `orch` command.

doit reads its commands before it loads dodo.py, so `doit help` (no topic) and `doit -h`
never reach the glue's preflight. The package registers these two classes under doit's
plugin group `doit.COMMAND` (pyproject.toml), which replaces doit's own: `doit help` and
`doit -h` list this tool's verbs (cli_vars.overview); anything else is doit's behaviour.

From a subdirectory without a dodo.py of its own, `doit <verb>` and `doit help <verb>` use
doit's own --seek-file (the nearest dodo.py above). `orch` (a console script) does the same
for every doit command and answers `orch`, `orch -h` and `orch --help` (which doit itself
answers before any plugin runs) with the overview.
"""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from types import FrameType

from doit.cmd_help import Help as DoitHelp
from doit.cmd_run import Run as DoitRun

from orchestrator.config import cli_vars
from orchestrator.config.command_line import split_words

HELP_FLAGS = ("-h", "--help")


class Help(DoitHelp):
    """`doit help` with no topic: this tool's verbs, then doit's own commands."""

    # The line a bare `doit --help` prints for this command: doit answers --help before any
    # plugin runs, but lists the commands' purposes, so it points at the verbs from there.
    doc_purpose = "this tool's verbs (build, switch, rollback, verify, bench, ...), one line each"

    def execute(self, params, args):  # noqa: ANN001,D102 - doit API
        if not args:
            print(cli_vars.overview())
            return 0
        seek_when_absent(params)
        return super().execute(params, args)


def seek_when_absent(params) -> None:  # noqa: ANN001 - doit's option values
    """doit's own --seek-file (dodo.py in a folder above) when the working directory has no
    dodo.py of its own and no -f names one: every verb works from a subdirectory."""
    if params.get("dodoFile") == "dodo.py" and not os.path.exists("dodo.py"):
        params["seek_file"] = True


class Run(DoitRun):
    """doit's default command; `doit -h` (no verb before it) prints the overview instead of
    doit's option-parser error; from a subdirectory it finds the project's dodo.py above."""

    def parse_execute(self, in_args):  # noqa: ANN001,D102 - doit API
        words, _ = split_words(in_args)  # `doit -f dodo.py -h` too; `doit build -h`: preflight
        if not words and any(a in HELP_FLAGS for a in in_args):
            print(cli_vars.overview())
            return 0
        return super().parse_execute(in_args)

    def execute(self, params, args):  # noqa: ANN001,D102 - doit API
        seek_when_absent(params)
        previous = signal.signal(signal.SIGTERM, _terminated)
        try:
            return super().execute(params, args)
        except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (a CI job cancelled, `timeout`)
            return interrupted(signal.SIGTERM if isinstance(e, Terminated) else signal.SIGINT)
        finally:
            signal.signal(signal.SIGTERM, previous)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread is, so that it unwinds as Ctrl-C does: each
    step's staging dir is removed on the way out and its process group is ended."""


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def interrupted(sig: signal.Signals) -> int:
    """One line instead of a traceback; the shell's exit status for a signal (128 + n)."""
    print(f"error: interrupted ({sig.name}): what had finished is kept and nothing half-done "
          "is visible; run the command again to go on from there", file=sys.stderr, flush=True)
    return 128 + sig.value


def find_dodo(start: Path) -> Path | None:
    """The nearest dodo.py in start or a folder above it."""
    for folder in (start, *start.parents):
        if (folder / "dodo.py").is_file():
            return folder / "dodo.py"
    return None


def main() -> None:
    """The `orch` console script: `doit -f <nearest dodo.py> ARGS...`."""
    args = sys.argv[1:]
    if not args or args[0] in HELP_FLAGS:
        print(cli_vars.overview())
        raise SystemExit(0)
    dodo = find_dodo(Path(os.getcwd()))
    if dodo is None:
        print(f"error: no dodo.py in {os.getcwd()} or a folder above it; run orch inside an "
              "orchestrator project", file=sys.stderr)
        raise SystemExit(2)
    from doit.doit_cmd import DoitMain

    raise SystemExit(DoitMain().run(["-f", str(dodo), *args]))
