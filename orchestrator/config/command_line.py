"""The doit command line's words, read by doit's own rule, for code that runs before doit
parses it (dodo.py's fast path, the glue's preflight): positional words, `name=value`
variables, options. Imports nothing heavy: the fast path reads it first."""
from __future__ import annotations

import sys
from pathlib import Path

# doit's own commands (a first word that is one of these is not a verb of ours)
DOIT_COMMANDS = frozenset({"help", "run", "list", "info", "clean", "forget", "ignore", "dumpdb",
                           "strace", "tabcompletion", "reset-dep", "auto"})
# doit's options that take the next word as their value
OPTIONS_WITH_VALUE = frozenset({"-f", "--file", "-d", "--dir", "--db-file", "--backend",
                                "--check_file_uptodate", "-r", "--reporter", "-o",
                                "--output-file", "-n", "--process", "-P", "--parallel-type",
                                "-v", "--verbosity", "--failure-verbosity",
                                "--auto-delayed-regex", "--codec-cls"})


def cli_argv() -> list[str] | None:
    """sys.argv[1:] when this process is the doit command (`doit`, `python -m doit`, `orch`);
    None when doit is driven in-process (DoitMain(...).run(argv)), whose words we cannot see."""
    prog = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path()
    if prog.name in ("doit", "orch") or (prog.name == "__main__.py" and prog.parent.name == "doit"):
        return list(sys.argv[1:])
    return None


def split_words(argv: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """(positional words, [(name, value)] in order) by doit's rule; options are skipped. The
    words after `--` are a command's (`doit bench ... -- CMD`), not doit's: they are left out."""
    words: list[str] = []
    pairs: list[tuple[str, str]] = []
    skip = False
    for arg in argv:
        if arg == "--":
            break
        if skip:
            skip = False
        elif arg.startswith("-"):
            skip = arg in OPTIONS_WITH_VALUE
        elif "=" in arg:
            name, value = arg.split("=", 1)
            pairs.append((name, value))
        else:
            words.append(arg)
    return words, pairs


def command_after_dashes(argv: list[str]) -> list[str]:
    """The words after the first `--` (a command `doit bench` / `doit run` runs), else []."""
    return list(argv[argv.index("--") + 1:]) if "--" in argv else []
