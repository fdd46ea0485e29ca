"""doit task definitions: one per verb, mapping it to its module in orchestrator.verbs (no logic
here; the module is imported only when its task runs, so `doit list` and help stay fast). Each verb's doc and variables live in orchestrator.cli_vars."""
from __future__ import annotations

from orchestrator.doit_glue import args_task, task


def task_lock():
    """Resolve locks/*.toml into locks/*.lock.json (lock=NAME for one)."""
    return task("lock:cmd_lock", "lock")


def task_toolchain():
    """Materialize the recipe's lock into <store>/toolchains/<hash>/ (venv + debs)."""
    return task("toolchain:cmd_toolchain", "toolchain")


def task_build():
    """Build recipe=NAME variant=NAME into the store (substitute=0 skips caches)."""
    return task("build:cmd_build", "build")


def task_verify():
    """Check recipe/variant (or id=) for ABI, linkage, debug info, CUDA archs (format=json)."""
    return task("verify:cmd_verify", "verify")


def task_switch():
    """Point the workspace's profile at recipe/variant, building it first if missing."""
    return task("switch:cmd_switch", "switch")


def task_rollback():
    """Return the workspace's profile to the previous generation."""
    return task("rollback:cmd_rollback", "rollback")


def task_status():
    """Show the active artifact and what else is in the store (format=json)."""
    return task("status:cmd_status", "status")


def task_plan():
    """Show recipe/variant's id, derivation, lock entries and what build would do (format=json)."""
    return task("plan:cmd_plan", "plan")


def task_why():
    """Why two stored artifacts differ: doit why ID_A ID_B (6+ hex digits each; format=json)."""
    return args_task("why:cmd_why", "why")


def task_gc():
    """Delete store entries no profile generation within the last keep=N refers to."""
    return task("gc:cmd_gc", "gc")


def task_push():
    """Upload recipe/variant (or id=, or all=1 for the recipe) to the cache, signed."""
    return task("push:cmd_push", "push")


def task_pull():
    """Fetch recipe/variant (or id=) from the substituters into the store; never builds."""
    return task("pull:cmd_pull", "pull")


def task_cache_keygen():
    """Write a cache signing key pair (name=...) outside the repo; print the public key."""
    return {**task("cache_keygen:cmd_keygen", "cache-keygen"), "basename": "cache-keygen"}


def task_vscode():
    """Write .vscode/ (lldb-14, gdb, debugpy), CMakePresets.json, .lldbinit/.gdbinit for the profile."""
    return task("vscode:cmd_vscode", "vscode")


def task_nightly():
    """Build bot: the nightly.toml matrix (jobs=N); `nightly matrix`, cell=R/V, `nightly report`."""
    return args_task("nightly:cmd_nightly", "nightly")


def task_bench():
    """Compare two artifacts' timings: variants=a,b (or ids=A,B) -- CMD (format=json, plot=)."""
    return args_task("bench:cmd_bench", "bench", whole=True)
