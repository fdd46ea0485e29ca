"""doit task definitions: one per verb, built from orchestrator.commands (no logic here).
Each verb's doc and variables live in orchestrator.cli_vars."""
from __future__ import annotations

from orchestrator import commands
from orchestrator.doit_glue import task, args_task


def task_lock():
    """Resolve locks/*.toml into locks/*.lock.json (lock=NAME for one)."""
    return task(commands.cmd_lock, "lock")


def task_toolchain():
    """Materialize the recipe's lock into <store>/toolchains/<hash>/ (venv + debs)."""
    return task(commands.cmd_toolchain, "toolchain")


def task_build():
    """Build recipe=NAME variant=NAME into the store (substitute=0 skips caches)."""
    return task(commands.cmd_build, "build")


def task_verify():
    """Check recipe/variant (or id=) for ABI, linkage, debug info, CUDA archs (format=json)."""
    from orchestrator.verify.command import cmd_verify
    return task(cmd_verify, "verify")


def task_switch():
    """Point the workspace's profile at recipe/variant, building it first if missing."""
    return task(commands.cmd_switch, "switch")


def task_rollback():
    """Return the workspace's profile to the previous generation."""
    return task(commands.cmd_rollback, "rollback")


def task_status():
    """Show the active artifact and what else is in the store (format=json)."""
    return task(commands.cmd_status, "status")


def task_plan():
    """Show recipe/variant's id, derivation, lock entries and what build would do (format=json)."""
    from orchestrator.plan_why import cmd_plan
    return task(cmd_plan, "plan")


def task_why():
    """Why two stored artifacts differ: doit why ID_A ID_B (6+ hex digits each; format=json)."""
    from orchestrator.plan_why import cmd_why
    return args_task(cmd_why, "why")


def task_gc():
    """Delete store entries no profile generation within the last keep=N refers to."""
    return task(commands.cmd_gc, "gc")


def task_push():
    """Upload recipe/variant (or id=, or all=1 for the recipe) to the cache, signed."""
    from orchestrator.cache.commands import cmd_push
    return task(cmd_push, "push")


def task_pull():
    """Fetch recipe/variant (or id=) from the substituters into the store; never builds."""
    from orchestrator.cache.commands import cmd_pull
    return task(cmd_pull, "pull")


def task_cache_keygen():
    """Write a cache signing key pair (name=...) outside the repo; print the public key."""
    from orchestrator.cache.commands import cmd_keygen
    return {**task(cmd_keygen, "cache-keygen"), "basename": "cache-keygen"}


def task_vscode():
    """Write .vscode/ (lldb-14, gdb, debugpy), CMakePresets.json, .lldbinit/.gdbinit for the profile."""
    from orchestrator import ide
    return task(ide.cmd_vscode, "vscode")


def task_nightly():
    """Build bot: the nightly.toml matrix (jobs=N); `nightly matrix`, cell=R/V, `nightly report`."""
    from orchestrator.bot import cmd_nightly
    return args_task(cmd_nightly, "nightly")
