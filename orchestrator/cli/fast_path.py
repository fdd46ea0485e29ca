"""dodo.py's fast path: a repeated no-op `doit build` or `doit switch` answered from its plan
memo (plan_memo.py) before doit loads a task, so neither the planner (pydantic models, rich,
the builders) nor doit's task machinery is imported.

`answer` takes the memo only when every recorded stat is the same, every identity made again
comes out the same, the artifact is this store's entry named by the memo's id with the same
manifest, the store holds no stale temp and, for a switch, the toolchain is the recorded one
and the workspace's IDE files (when managed) are as the last refresh left them. Anything else
returns, and the full command runs and writes a new memo. Output is what the full command
prints: the same JSON line, or the same human line on stderr.
"""
from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from orchestrator.config.command_line import cli_argv
from orchestrator.memo.file_reads import offer, stat_sig
from orchestrator.memo.plan_memo import FORMAT, Command, begin, command_of
from orchestrator.model.store_layout import MANIFEST_NAME, TOOLCHAIN_JSON, StorePaths
from orchestrator.verbs.replies import Reply, build_reply, switch_reply, write_plain


def answer(repo_root: Path) -> None:
    """Answer this doit command from its memo and exit 0, or return (the full command runs,
    and `remember` keeps a memo of it)."""
    argv = cli_argv()
    if argv is None:
        return
    cmd = command_of(repo_root.absolute(), argv)
    if cmd is None:
        return
    begin(cmd)
    t0 = time.monotonic()
    try:
        memo = json.loads(cmd.memo_file.read_bytes())
    except (OSError, ValueError):
        return
    try:
        if not isinstance(memo, dict) or memo.get("format") != FORMAT:
            return
        if not still_holds(cmd, memo):
            start_ninja_ahead(cmd, memo)
            return
        reply = noop_build_reply(memo, t0) if cmd.verb == "build" else noop_switch_reply(cmd, memo)
    except (TypeError, ValueError, KeyError, AttributeError, OSError):
        return  # a memo this code cannot read: the full command writes a new one
    if reply is None:
        return
    write_plain(reply, cmd.variables.get("format") == "json")
    raise SystemExit(0)


def noop_build_reply(memo: dict[str, Any], t0: float) -> Reply:
    """The no-op build's answer (verbs.replies, as verbs/build.py gives it)."""
    return build_reply(memo["recipe"], memo["variant"], memo["id"], memo["artifact"], "present",
                       time.monotonic() - t0)


def noop_switch_reply(cmd: Command, memo: dict[str, Any]) -> Reply | None:
    """Make the switch, then its answer (verbs.replies, as verbs/switch.py gives it; None:
    the full command has to run)."""
    done = switch(cmd, memo)
    if done is None:
        return None
    gen, changed = done
    return switch_reply(str(cmd.workspace), gen, changed, memo["recipe"], memo["variant"],
                        memo["id"], memo["artifact"], "present")


def still_holds(cmd: Command, memo: dict[str, Any]) -> bool:
    """Every input the plan read is as it was, and the store still has its answer."""
    from orchestrator.store.artifacts import ARTIFACT_RE, Store

    if not cmd.workspace.is_dir():
        return False  # the full command says so
    store = Store(cmd.store_root)
    art = Path(memo["artifact"])
    name = ARTIFACT_RE.match(art.name)
    if art.parent != store.store_dir or name is None \
            or f"{memo['id']}-{memo['recipe']}-{memo['variant']}" != art.name:
        return False  # only an entry of this store, named by the memo's id
    manifest = stat_sig(os.path.join(memo["artifact"], MANIFEST_NAME))
    if manifest is None or manifest != memo["manifest"] or not inputs_hold(memo):
        return False
    if not memo["toolchain"] or any(sig is None or stat_sig(p) != sig
                                    for p, sig in memo["toolchain"]):
        return False  # the toolchain's quick signature: the full command looks at it
    if store.stale_temps():
        return False  # the full command cleans them up
    if memo["redo"]:
        from orchestrator.hashing import StatCache
        from orchestrator.memo import head_start

        # Making the source's identity again costs as much as a small compile (git status on
        # PyTorch's 11k files, or the tree's hash): every other input of the plan holds, so
        # the tree's last ninja starts first, and is stopped again if nothing changed.
        start_ninja_ahead(cmd, memo)
        cache = StatCache(StorePaths(cmd.store_root).source_stat_cache)
        same = True
        for kind, args, result in memo["redo"]:
            now = redo(kind, args, cache)
            if now is not None:
                offer(kind, args, now)  # the planner, if it runs, takes it (computed once)
            if now != result:
                same = False
                break
        with contextlib.suppress(OSError):
            cache.save()
        if not same:
            return False
        head_start.stop()  # a no-op: what it started is stopped (and anything it built removed)
    return True


def start_ninja_ahead(cmd: Command, memo: dict[str, Any]) -> None:
    """The source tree changed and every other input of the plan holds: start the last
    build's ninja now, while the full command plans (head_start.py adopts or stops it)."""
    from orchestrator.memo import head_start
    from orchestrator.store.artifacts import Store

    tree, src = memo.get("build_tree"), memo.get("source_dir")
    if not isinstance(tree, str) or not isinstance(src, str) or not cmd.workspace.is_dir() \
            or not inputs_hold(memo, but=src):
        return
    store = Store(cmd.store_root)
    head_start.start(Path(tree), store.build_dir, store.locks_dir)


def inputs_hold(memo: dict[str, Any], but: str | None = None) -> bool:
    """Every file the plan read (but `but`) and every binary it probed are as they were."""
    from orchestrator.lock.probe_cache import binary_signature

    return all(stat_sig(p) == sig for p, sig in memo["files"] if p != but) \
        and all(binary_signature(f) == sig for f, sig in memo["bins"])


def redo(kind: str, args: list[Any], cache: Any) -> Any:
    """What read_trace.recorded(kind, args, ...) computes, computed again (JSON-shaped)."""
    if kind == "tree":
        from orchestrator.hashing import tree_digest

        root, dirs, files = args
        return tree_digest(Path(root), cache, dirs, files)
    if kind == "checkout":
        from orchestrator.sources.checkout import tree_identity

        return json.loads(json.dumps(tree_identity(Path(args[0]), cache)))
    return None  # a kind this code does not know: never the same


def switch(cmd: Command, memo: dict[str, Any]) -> tuple[int, bool] | None:
    """The switch the full command would make (None: it has to run, e.g. to refresh IDE
    files or because the toolchain changed)."""
    from orchestrator.errors import UserError
    from orchestrator.ide.managed import is_managed
    from orchestrator.store.artifacts import Store
    from orchestrator.workspace.profiles import Workspace

    sw = memo["switch"]
    store = Store(cmd.store_root)
    ws, toolchain = Path(sw["workspace"]), Path(sw["toolchain"])
    if ws != cmd.workspace or not ws.is_dir():
        return None
    if is_managed(ws):  # the IDE files as the last refresh left them, and all it read
        ide = sw.get("ide")
        if not ide or any(stat_sig(p) != sig for p, sig in ide):
            return None
    sig = stat_sig(str(toolchain / TOOLCHAIN_JSON))
    if toolchain.parent != store.toolchains_dir or sig is None or sig != sw["toolchain_sig"]:
        return None
    try:
        return Workspace(ws).switch(Path(memo["artifact"]), store, toolchain, sw["outputs"])
    except (UserError, OSError):
        return None  # the full command says what is wrong, in its words
