"""The checks the field's anchors run, inside the suite so the README's test command covers
them: ruff (pyproject's [tool.ruff]: pyflakes, pycodestyle, isort, pyupgrade, bugbear) and
mypy --strict on the packages pyproject's [tool.mypy] lists. Both at 0 findings; the
pre-commit configuration runs the same two, and is itself checked here."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing() -> None:
    res = run(str(BIN / "ruff"), "check", "--no-cache", "--output-format", "concise", ".")
    assert res.returncode == 0, f"ruff check (fix: .venv/bin/ruff check --fix):\n{res.stdout}{res.stderr}"


def test_mypy_strict_finds_nothing() -> None:
    res = run(str(BIN / "mypy"), "--cache-dir", "/dev/null")
    assert res.returncode == 0, f"mypy (pyproject [tool.mypy]):\n{res.stdout}{res.stderr}"
    assert "Success: no issues found" in res.stdout and "orchestrator" not in res.stderr, res.stdout


def test_the_strict_packages_include_the_schemas_and_the_store() -> None:
    import tomllib

    mypy = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    assert mypy["strict"] is True
    assert {"orchestrator/model", "orchestrator/store"} <= set(mypy["files"])


def test_pre_commit_configuration_is_valid_and_runs_the_same_checks() -> None:
    res = run(str(BIN / "pre-commit"), "validate-config", ".pre-commit-config.yaml")
    assert res.returncode == 0, res.stdout + res.stderr
    text = (REPO / ".pre-commit-config.yaml").read_text()
    assert "ruff check" in text and "mypy" in text
