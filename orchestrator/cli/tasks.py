"""doit task definitions: one per verb, mapping it to its module in orchestrator.verbs (no logic
here; the module is imported only when its task runs, so `doit list` and help stay fast).
Each verb's one line (`doit list`, `doit help`) and its variables live in orchestrator.config.cli_vars
only: a task function carries no docstring of its own to drift from them."""
from __future__ import annotations

from orchestrator.cli.doit_glue import args_task, task
from orchestrator.cli.graph import task_artifact  # noqa: F401 - doit collects task_* from here


def task_lock():
    return task("lock:cmd_lock", "lock")


def task_toolchain():
    return task("toolchain:cmd_toolchain", "toolchain")


def task_build():
    return task("build:cmd_build", "build")


def task_verify():
    return task("verify:cmd_verify", "verify")


def task_switch():
    return args_task("switch:cmd_switch", "switch")  # `doit switch -`


def task_rollback():
    return task("rollback:cmd_rollback", "rollback")


def task_status():
    return task("status:cmd_status", "status")


def task_plan():
    return task("plan:cmd_plan", "plan")


def task_why():
    return args_task("why:cmd_why", "why")


def task_gc():
    return task("gc:cmd_gc", "gc")


def task_push():
    return task("push:cmd_push", "push")


def task_pull():
    return task("pull:cmd_pull", "pull")


def task_cache_keygen():
    return {**task("cache_keygen:cmd_keygen", "cache-keygen"), "basename": "cache-keygen"}


def task_cache_check():
    return {**task("cache_check:cmd_cache_check", "cache-check"), "basename": "cache-check"}


def task_vscode():
    return task("vscode:cmd_vscode", "vscode")


def task_nightly():
    return args_task("nightly:cmd_nightly", "nightly")


def task_bench():
    return args_task("bench:cmd_bench", "bench", whole=True)
