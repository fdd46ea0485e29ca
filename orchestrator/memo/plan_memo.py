"""The plan memo: what a `doit build` / `doit switch` command's plan read and answered, so the
next run of the same command can be answered without the planner (fast_path.answer).

The full command traces its plan (read_trace): the files it opened or listed, the files
the stat caches and the probe cache answered for, the PATH directories, and the source
identities computed from a tree, kept as calls to make again. A plan that ran any other
subprocess is not kept. `remember` writes `<store>/cache/plan-memo/<key>.json`, keyed by
the verb and its variables, the environment (less SHELL_ONLY), the working directory, the
interpreter and the orchestrator's own code (every .py file's size and mtime) and installed
packages (site-packages' stat).

A switch of a managed workspace also keeps what its refresh of the IDE files read, when that
refresh wrote nothing (`ide_reads`). ORCH_PLAN_MEMO=0 turns memos off (neither used nor
written).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from orchestrator.config.command_line import split_words
from orchestrator.fs import FileSig
from orchestrator.memo.file_reads import Trace, stat_sig, tracing
from orchestrator.memo.state import STATE
from orchestrator.model.store_layout import (
    MACHINE_STAT_CACHE,
    MANIFEST_NAME,
    PROBE_CACHE,
    SOURCE_STAT_CACHE,
    StorePaths,
)

FORMAT = 1
VERBS = ("build", "switch")
# doit's options that only say where dodo.py and the working directory are (both key the memo:
# repo_root is dodo.py's directory, the cwd doit changed to is in the key).
PLACE_OPTIONS = frozenset({"-f", "--file", "-d", "--dir"})
# Variables that make the verb do more than look the plan up (they always run in full).
FULL_ONLY = frozenset({"rebuild", "check", "commit_failed"})
# Pure caches under <store>/cache/: their content follows from inputs the trace notes.
CACHE_FILES = (SOURCE_STAT_CACHE, MACHINE_STAT_CACHE, PROBE_CACHE)
# The shell's and terminal's own variables: no plan reads them, and they change per shell.
SHELL_ONLY = frozenset({
    "_", "OLDPWD", "PWD", "SHLVL", "PS1", "PS2", "PS4", "PROMPT_COMMAND", "TERM", "COLORTERM",
    "COLUMNS", "LINES", "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "TERM_SESSION_ID", "WINDOWID",
    "TMUX", "TMUX_PANE", "STY", "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY", "SSH_AUTH_SOCK",
    "DISPLAY", "XAUTHORITY", "LS_COLORS", "HISTFILE", "HISTSIZE", "HISTFILESIZE",
    "HISTCONTROL", "MAIL", "LESSOPEN", "LESSCLOSE"})
SHELL_PREFIXES = ("VSCODE_",)

PACKAGE = Path(__file__).resolve().parents[1]  # all of orchestrator/, not only memo/


class Command:
    """The command this process runs when it may be memoized: its key and memo file."""

    def __init__(self, verb: str, variables: dict[str, str], key: str, store_root: Path,
                 workspace: Path) -> None:
        self.verb, self.variables, self.key = verb, variables, key
        self.store_root, self.workspace = store_root, workspace

    @property
    def memo_file(self) -> Path:
        return StorePaths(self.store_root).memos / f"{self.key}.json"




def code_fingerprint(repo_root: Path) -> list[Any]:
    """(path, size, mtime_ns) of every .py file of the package and dodo.py, and the stat of
    the directory the installed packages live in (an install or removal changes it)."""
    out: list[Any] = []
    stack = [str(PACKAGE)]
    while stack:
        d = stack.pop()
        with os.scandir(d) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    if e.name != "__pycache__":
                        stack.append(e.path)
                elif e.name.endswith(".py"):
                    st = e.stat()
                    out.append([e.path, *FileSig.of(st)])
    import doit  # already imported: dodo.py runs under doit

    site = os.path.dirname(os.path.dirname(doit.__file__))
    out.sort()
    out.append([str(repo_root / "dodo.py"), stat_sig(str(repo_root / "dodo.py"))])
    out.append([site, stat_sig(site)])
    return out


def command_of(repo_root: Path, argv: list[str]) -> Command | None:
    """The memoizable command `argv` is, or None (another verb, options, help, a variable
    given twice, a full-only variable, ORCH_PLAN_MEMO=0)."""
    if os.environ.get("ORCH_PLAN_MEMO", "1") == "0":
        return None
    options = [a for i, a in enumerate(argv) if a.startswith("-")
               and not (i and argv[i - 1] in PLACE_OPTIONS)]
    if any(a not in PLACE_OPTIONS for a in options):
        return None  # -v, --help, -n ...: doit's own behaviour
    words, pairs = split_words(argv)
    if words[:1] == ["run"]:
        words = words[1:]
    if len(words) > 1 or (words and words[0] not in VERBS):
        return None
    variables = dict(pairs)
    if len(variables) != len(pairs) or FULL_ONLY & set(variables):
        return None
    verb = words[0] if words else "build"
    # As Settings.from_vars reads them (a memo's answer is only used where they agree).
    raw = variables.get("store") or os.environ.get("ORCH_STORE") or str(repo_root / "artifacts")
    ws = variables.get("workspace") or variables.get("source") or str(repo_root)
    try:
        store_root, workspace = (Path(p).expanduser().absolute() for p in (raw, ws))
    except (RuntimeError, ValueError):
        return None
    env = {k: v for k, v in os.environ.items()
           if k not in SHELL_ONLY and not k.startswith(SHELL_PREFIXES)}
    key = hashlib.sha256(json.dumps({
        "format": FORMAT, "verb": verb, "vars": variables, "env": env, "cwd": os.getcwd(),
        "repo": str(repo_root), "python": [sys.executable, sys.version],
        "code": code_fingerprint(repo_root)}, sort_keys=True).encode()).hexdigest()[:40]
    return Command(verb, variables, key, store_root, workspace)


def begin(cmd: Command) -> None:
    """This process runs `cmd` in full: its plan is traced and its memo kept."""
    STATE.command = cmd


@contextlib.contextmanager
def planning(store_root: Path) -> Iterator[None]:
    """Trace the block (the plan) when this command may be memoized."""
    if STATE.command is None or STATE.command.store_root != store_root:
        yield
        return
    skip = frozenset(str(StorePaths(store_root).cache / name) for name in CACHE_FILES)
    with tracing(skip) as t:
        yield
    STATE.plan_reads = t


@contextlib.contextmanager
def tracing_ide() -> Iterator[Trace | None]:
    """Trace the block (a switch's refresh of the IDE files) when this command may be
    memoized; None otherwise."""
    if STATE.command is None:
        yield None
        return
    with tracing() as t:
        yield t


def ide_reads(t: Trace | None, written: list[Path] | None) -> list[Any] | None:
    """What a fast switch checks instead of refreshing the IDE files: everything the refresh
    read (the files themselves among it), kept only when it wrote nothing (the files are
    what a refresh makes of them) and ran no subprocess."""
    if t is None or written is None or written or t.unsafe is not None:
        return None
    return sorted(t.files.items())


def memo_artifact(path: Path) -> str | None:
    """The artifact a memo file answers with (None: not a memo this code can read)."""
    try:
        memo = json.loads(path.read_bytes())
        art = memo["artifact"] if memo.get("format") == FORMAT else None
        return art if isinstance(art, str) else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def remember(r: Any, switch_to: dict[str, Any] | None = None) -> None:
    """Keep the memo of this command's answer (a Realised `r`; for a switch, what it linked).
    Written atomically; a store we cannot write only costs the next command its plan."""
    from orchestrator.fs import write_atomic
    from orchestrator.toolchain.materialize import FILES_MANIFEST, TOOLCHAIN_JSON, toolchain_root

    t, cmd = STATE.plan_reads, STATE.command
    if t is None or cmd is None or t.unsafe is not None:
        return
    files = dict(t.files)
    src = str(r.plan.source_dir)  # an unpacked source deleted or made again: plan again
    files.setdefault(src, stat_sig(src))
    memo = {
        "format": FORMAT, "files": sorted(files.items()), "bins": sorted(t.bins.items()),
        "redo": t.redo, "artifact": str(r.path), "id": r.plan.artifact_id,
        "manifest": stat_sig(str(r.path / MANIFEST_NAME)),
        "recipe": r.plan.recipe.name, "variant": r.plan.variant_name, "switch": switch_to,
        "source_dir": src, "build_tree": str(r.build_tree()),
        # The toolchain's quick signature: its entry, description and file manifest as they
        # were (a toolchain deleted, replaced or re-made is a full command).
        "toolchain": [[str(p), stat_sig(str(p))] for root in [toolchain_root(r.store, r.plan.lock)]
                      for p in (root, root / TOOLCHAIN_JSON, root / FILES_MANIFEST)]}
    with contextlib.suppress(OSError):
        cmd.memo_file.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(cmd.memo_file, json.dumps(memo), durable=False)
