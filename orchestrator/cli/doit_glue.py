"""Glue between doit and the verbs: variables → Settings, errors → exit codes, quiet output.

A UserError becomes a doit TaskError (exit 2) printed as one line; a CheckFailed becomes a
TaskFailed (exit 1) printed with its report. Neither prints a traceback.

doit has no public way to list every `name=value` variable or to see one given twice, so
the glue reads the command line's words itself, with doit's own rule (a word not starting
with `-` that holds `=`): from sys.argv for the doit command, from the arguments handed to
`DoitEntry.run` when doit is driven in-process (tests). Before doit runs anything
(`preflight`, when dodo.py is loaded by the doit command) it answers `doit help <verb>` /
`doit <verb> --help` from orchestrator.config.cli_vars and refuses an unknown verb or a duplicated
variable (exit 2).
"""
from __future__ import annotations

import gc
import importlib
from collections.abc import Callable
from pathlib import Path

from doit import get_var
from doit.doit_cmd import DoitMain
from doit.exceptions import TaskError, TaskFailed
from doit.reporter import ConsoleReporter
from rich.markup import escape

from orchestrator.config import cli_vars
from orchestrator.config.command_line import DOIT_COMMANDS, cli_argv, split_words
from orchestrator.config.settings import Settings
from orchestrator.console import console
from orchestrator.errors import CheckFailed, UserError, is_no_space, no_space

REPO_ROOT: Path = Path.cwd()
ARTIFACT_TASKS = "artifact"  # cli.graph: artifact:<recipe>:<variant>
# cli.graph's groups: their tasks are step-<step>:<...> and artifact:<recipe>:<variant>
GRAPH_GROUPS = ("step-toolchain", "step-source", "step-build", "step-verify", "step-commit", ARTIFACT_TASKS)
DEP_FILE = ":memory:"  # sqlite3's name for a database that is never written to disk

def configure(repo_root: Path) -> None:
    global REPO_ROOT
    REPO_ROOT = repo_root.absolute()


class DoitEntry(DoitMain):
    """doit's entry point for in-process use (DoitEntry(loader).run(argv)): it keeps the
    command line's variables for command_vars, which cannot see them in sys.argv."""

    in_process_vars: dict[str, str] | None = None
    in_process_argv: list[str] | None = None

    def process_args(self, cmd_args: list[str]) -> list[str]:  # noqa: D102 - doit API
        DoitEntry.in_process_vars = dict(split_words(cmd_args)[1])
        DoitEntry.in_process_argv = list(cmd_args)
        return super().process_args(cmd_args)


def command_vars() -> dict[str, str]:
    """The command line's variables (a later duplicate wins, as in doit; preflight refuses
    duplicates on the doit command)."""
    argv = cli_argv()
    if argv is not None:
        return dict(split_words(argv)[1])
    if DoitEntry.in_process_vars is not None:
        return dict(DoitEntry.in_process_vars)
    # Another in-process driver: what doit's public get_var gives for the names we know.
    return {n: v for n in (*cli_vars.KNOWN, "force") if (v := get_var(n)) is not None}


def _verbs_of(words: list[str]) -> list[str]:
    """The task names a command line runs (doit's `run` implied), up to a positional verb."""
    if words and words[0] == "run":
        words = words[1:]
    out: list[str] = []
    for w in words:
        out.append(w)
        spec = cli_vars.VERBS.get(w)
        if spec is not None and spec.positional:
            break
    return out


def preflight(argv: list[str]) -> None:
    """Answer help and refuse unknown verbs / duplicated variables before doit starts.
    Exits (0 after help, 2 after one `error:` line); returns when doit should go on."""
    words, pairs = split_words(argv)
    options = [a for a in argv if a.startswith("-")]

    def refuse(msg: str) -> None:
        console.print(f"[red]error:[/] {escape(msg)}", soft_wrap=True)
        raise SystemExit(2)

    if words and words[0] == "help":
        if len(words) == 1:
            print(cli_vars.overview())
            raise SystemExit(0)
        if words[1] in cli_vars.VERBS:
            print(cli_vars.verb_help(words[1]))
            raise SystemExit(0)
        if words[1] not in DOIT_COMMANDS:
            hint = cli_vars.did_you_mean(words[1], [*cli_vars.VERBS, *DOIT_COMMANDS],
                                         "`doit help {}`")
            refuse(f"no help topic {words[1]!r}{hint or '; `doit help` lists the verbs'}")
    if words and words[0] in DOIT_COMMANDS and words[0] != "run":
        return
    verbs = _verbs_of(words)
    if "--help" in options or "-h" in options:
        print(cli_vars.verb_help(verbs[0]) if verbs and verbs[0] in cli_vars.VERBS
              else cli_vars.overview())
        raise SystemExit(0)

    for w in verbs:
        group = w.partition(":")[0]
        if group in GRAPH_GROUPS and w == group:
            refuse(f"`doit {w}` alone would run it for every recipe variant; name one: "
                   f"doit {w}:<...> (`doit list --all` lists them)")
        if group in GRAPH_GROUPS:
            continue  # cli.graph's tasks; doit itself refuses a name it does not have
        if w not in cli_vars.VERBS:
            hint = cli_vars.did_you_mean(w, [*cli_vars.VERBS, *DOIT_COMMANDS], "`doit {}`")
            refuse(f"unknown verb {w!r}{hint or '; `doit list` shows the verbs'}")
    seen: dict[str, str] = {}
    for name, value in pairs:
        if name in seen:
            refuse(f"variable {name}= given twice ({seen[name]!r}, {value!r}); pass it once")
        seen[name] = value


def current_settings(verb: str | None = None, fixed: dict[str, str] | None = None) -> Settings:
    """The command line's settings; `fixed` variables (an artifact task's recipe and variant)
    replace the command line's."""
    variables = {**command_vars(), **(fixed or {})}
    if verb is not None:
        cli_vars.check_verb_vars(verb, list(variables))
    return Settings.from_vars(REPO_ROOT, variables)


def load_verb(ref: str) -> Callable[..., object]:
    """The verb function `ref` names ("<module in orchestrator.verbs>:<function>"), imported
    on first use: `doit list`, `doit help` and the other verbs never import it."""
    module, _, function = ref.partition(":")
    return getattr(importlib.import_module(f"orchestrator.verbs.{module}"), function)


def action(verb: str, name: str | None = None, words: list[str] | None = None,
           fixed: dict[str, str] | None = None) -> Callable[[], object]:
    """A doit python-action running verb (see load_verb) with the command line's settings
    (checked against the variables verb `name` takes, `fixed` ones replacing them), and its
    positional words if given."""

    def call(settings: Settings) -> object:
        fn = load_verb(verb)
        # What is imported lives as long as the command: the collector no longer walks
        # it (its full collections cost an edit → build 0.04-0.06 s, in verify).
        gc.freeze()
        return fn(settings) if words is None else fn(settings, list(words))

    run = guarded(call, name, fixed)
    run.__name__ = verb.partition(":")[2]
    return run


def step_action(call: Callable[[Settings], object], fixed: dict[str, str]) -> Callable[[], object]:
    """A doit python-action for a step of cli.graph: `call` with the build verb's settings
    (`fixed` replacing the command line's recipe and variant)."""
    return guarded(call, "build", fixed)


def guarded(call: Callable[[Settings], object], name: str | None,
            fixed: dict[str, str] | None) -> Callable[[], object]:
    """`call(settings)` as a doit python-action: a UserError (or a full disk) is one line and
    a TaskError (exit 2), a CheckFailed its report and a TaskFailed (exit 1)."""
    def run() -> object:
        try:
            call(current_settings(name, fixed))
        except (UserError, OSError) as e:
            if isinstance(e, OSError):  # a full disk is one line; any other OSError is a bug
                if not is_no_space(e):
                    raise
                e = no_space(e.filename or current_settings().store_root)
            console.print(f"[red]error:[/] {escape(str(e))}", soft_wrap=True)
            return TaskError(str(e), report=False)
        except CheckFailed as e:
            console.print(f"[red]failed:[/] {escape(str(e))}", soft_wrap=True)
            if e.report:
                console.print(e.report, soft_wrap=True, markup=False)
            return TaskFailed(str(e), report=False)
        return None
    return run


def task(verb: str, name: str) -> dict:
    """The task dict of verb `name` (its doc from orchestrator.config.cli_vars)."""
    return {"actions": [action(verb, name)], "doc": cli_vars.VERBS[name].doc,
            "uptodate": [False], "verbosity": 2}


def whole_command_line() -> list[str]:
    """The command line's words as typed (doit drops `name=value` words and options from a
    task's positional words, also from a command after `--`)."""
    argv = cli_argv()
    return argv if argv is not None else list(DoitEntry.in_process_argv or [])


def args_task(verb: str, name: str, whole: bool = False) -> dict:
    """A task whose verb also gets the command line's positional words (`doit why A B`), or
    with `whole` every word of it (`doit bench ... -- CMD` reads the words after `--`)."""

    def run(pos: list[str]) -> object:
        return action(verb, name, whole_command_line() if whole else pos)()

    run.__name__ = verb.partition(":")[2]
    return {**task(verb, name), "actions": [run], "pos_arg": "pos"}


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


def runs_a_command(argv: list[str]) -> bool:
    """`doit run [name=value ...] -- CMD`: our `run` verb, not doit's run command (doit would
    take CMD's words for task names)."""
    words = split_words(argv)[0]
    return "--" in argv and words in (["run"], ["run", "run"])


def run_verb_now(argv: list[str]) -> None:
    """Run `doit run ... -- CMD` before doit selects tasks; exits with its status (the
    command's own when it ran: the verb replaces this process)."""
    failure = action("run:cmd_run", "run", argv)()
    raise SystemExit(2 if isinstance(failure, TaskError) else 1 if failure else 0)


def doit_config(repo_root: Path) -> dict:
    argv = cli_argv()
    if argv is not None:
        preflight(argv)
    configure(repo_root)
    if argv is not None and runs_a_command(argv):
        run_verb_now(argv)
    (repo_root / ".orch").mkdir(exist_ok=True)
    # doit's dependency DB in memory: every task runs (uptodate False) and nothing reads what
    # doit records, while a file cost each command sqlite's commit (4 fdatasync, 15-20 ms on
    # a busy disk) and concurrent commands a shared file.
    return {"reporter": QuietReporter, "backend": "sqlite3", "dep_file": DEP_FILE,
            "verbosity": 2, "default_tasks": ["build"]}
