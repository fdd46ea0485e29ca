"""Per-verb help and variable checks: one table (orchestrator.config.cli_vars) drives `doit help
<verb>`, `doit <verb> --help` and the refusal of variables a verb does not take."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.cli import tasks
from orchestrator.config import cli_vars
from tests.conftest import copy_project, run_doit


@pytest.fixture(scope="module")
def proj(tmp_path_factory) -> Path:
    return copy_project(tmp_path_factory.mktemp("cli") / "project")


def one_error(res) -> str:  # noqa: ANN001
    assert "Traceback" not in res.output, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), res.output
    return lines[0]


def test_every_task_has_a_table_and_every_variable_is_declared() -> None:
    verbs = [n for n in dir(tasks) if n.startswith("task_") and n != "task_artifact"]  # cli.graph's
    names = {getattr(tasks, n)().get("basename", n[5:]) for n in verbs}
    assert names | cli_vars.BEFORE_DOIT == set(cli_vars.VERBS)
    assert not names & cli_vars.BEFORE_DOIT
    for verb in cli_vars.VERBS.values():
        assert set(verb.vars) <= set(cli_vars.VARS)
    assert set().union(*(v.vars for v in cli_vars.VERBS.values())) == set(cli_vars.VARS)


@pytest.mark.parametrize("argv", [["help", "build"], ["build", "--help"], ["build", "-h"]])
def test_help_lists_the_verbs_variables(proj: Path, argv: list[str]) -> None:
    res = run_doit(proj, *argv)
    assert res.returncode == 0, res.output
    for name in cli_vars.VERBS["build"].vars:
        var = cli_vars.VARS[name]
        assert re.search(rf"^  {name}=\s+{re.escape(var.type)}\s+{re.escape(var.default)}\s+\S",
                         res.stdout, re.M), (name, res.stdout)
    assert "keep=" not in res.stdout  # a gc variable is not build's


def test_help_of_status_and_gc(proj: Path) -> None:
    out = run_doit(proj, "help", "gc").stdout
    assert "dry_run=" in out and "keep=" in out
    out = run_doit(proj, "help", "status").stdout
    assert "variant=" not in out and "workspace=" in out


@pytest.mark.parametrize("argv,needle", [
    (["biuld"], "did you mean `doit build`"),
    (["stauts"], "did you mean `doit status`"),
    (["zzzzqq"], "`doit list`"),
    (["status", "keep=2"], "`doit status` does not take keep="),
    (["status", "variant=relase"], "`doit status` does not take variant="),
    (["status", "wrokspace=x"], "did you mean workspace="),
    (["build", "variant=release", "variant=debug"], "variant= given twice"),
    (["status", "store=/nonexistent-orch/x"], "/nonexistent-orch does not exist"),
])
def test_bad_command_lines_are_one_line_exit_2(proj: Path, tmp_path: Path, argv: list[str],
                                               needle: str) -> None:
    extra = [] if any(a.startswith("store=") for a in argv) else [f"store={tmp_path / 's'}"]
    res = run_doit(proj, *argv, *extra)
    assert res.returncode == 2, res.output
    assert needle in one_error(res)
    assert not (tmp_path / "s").exists()
    assert not Path("/nonexistent-orch").exists()


def test_store_parent_must_exist_unless_create(proj: Path, tmp_path: Path) -> None:
    new = tmp_path / "fresh"  # the parent exists: a new store is fine
    assert run_doit(proj, "status", f"store={new}").returncode == 0
    deep = tmp_path / "a" / "b" / "store"
    res = run_doit(proj, "status", f"store={deep}")
    assert res.returncode == 2 and str(deep.parent) in one_error(res)
    assert not (tmp_path / "a").exists()
    res = run_doit(proj, "status", f"store={deep}", "create=1")
    assert res.returncode == 0, res.output


# --- issue 35: help that teaches itself ----------------------------------------------------

def test_doit_help_lists_this_tools_verbs_then_doits_commands(proj: Path) -> None:
    for argv in (["help"], ["-h"]):
        res = run_doit(proj, *argv)
        assert res.returncode == 0, res.output
        out = res.stdout
        for name, spec in cli_vars.VERBS.items():
            assert re.search(rf"^  {re.escape(name)}\s+{re.escape(spec.doc)}$", out, re.M), (name, out)
        assert out.index("  build ") < out.index("doit's own commands: list, help")
        assert "dumpdb" in out.split("doit's own commands:")[1]
        assert "CmdOption" not in res.output
    # A bare `doit --help` is doit's own usage (answered before any plugin runs): its `help`
    # line points at the verbs.
    bare = subprocess.run([sys.executable, "-m", "doit", "--help"], cwd=proj,
                          capture_output=True, text=True, timeout=60)
    assert bare.returncode == 0, bare.stderr
    assert re.search(r"^  \S+ help\s+this tool's verbs \(build, switch", bare.stdout, re.M), bare.stdout


@pytest.mark.parametrize("topic,needle", [("nosuch", "`doit help` lists the verbs"),
                                          ("stauts", "did you mean `doit help status`")])
def test_help_on_an_unknown_topic_is_exit_2(proj: Path, topic: str, needle: str) -> None:
    res = run_doit(proj, "help", topic)
    assert res.returncode == 2, res.output
    assert needle in one_error(res) and f"no help topic {topic!r}" in one_error(res)


def test_task_functions_carry_no_docstring_to_drift_from_cli_vars() -> None:
    for n in dir(tasks):
        if n.startswith("task_"):
            assert getattr(tasks, n).__doc__ is None, n


ORCH = Path(sys.executable).parent / "orch"


def test_orch_runs_every_verb_from_a_subdirectory(proj: Path, tmp_path: Path) -> None:
    sub = proj / "recipes" / "demo" / "csrc"
    assert sub.is_dir()
    env = {k: v for k, v in os.environ.items() if k not in ("ORCH_STORE", "MAX_JOBS")}
    res = subprocess.run([str(ORCH), "status", f"store={tmp_path / 's'}", "format=json"],
                         cwd=sub, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)["workspace"] == str(proj)  # the project's, not the subfolder's
    res = subprocess.run([str(ORCH), "help", "gc"], cwd=sub, env=env, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0 and "keep=" in res.stdout, res.stdout + res.stderr
    # plain doit too: doit's --seek-file when the folder has no dodo.py of its own
    res = subprocess.run([sys.executable, "-m", "doit", "status", f"store={tmp_path / 's'}",
                          "format=json"], cwd=sub, env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)["workspace"] == str(proj)
    for flag in ("-h", "--help"):
        res = subprocess.run([str(ORCH), flag], cwd=sub, capture_output=True, text=True)
        assert res.returncode == 0 and "  rollback  " in res.stdout, res.stdout + res.stderr
    res = subprocess.run([str(ORCH), "status"], cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.startswith("error: no dodo.py in"), res.stderr


@pytest.mark.parametrize("argv,needle", [
    (["plan", "variant=Release"], "did you mean variant=release?"),
    (["plan", "variant=RELWITHDEBINFO"], "did you mean variant=relwithdebinfo?"),
    (["plan", "recipe=Demo"], "did you mean recipe=demo?"),
    (["status", "Workspace=x"], "did you mean workspace=?"),
    (["Status"], "did you mean `doit status`?"),
])
def test_value_hints_ignore_case(proj: Path, tmp_path: Path, argv: list[str], needle: str) -> None:
    res = run_doit(proj, *argv, f"store={tmp_path / 's'}")
    assert res.returncode == 2, res.output
    assert needle in one_error(res)
