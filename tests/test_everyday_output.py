"""Everyday output that tells the truth and fits (issue 35): no ✓ on a failed step, `doit
plan`'s short summary (derivation=1 for the JSON), tables within 80 columns with 12-character
ids (format=json keeps them whole), gc's dry run naming what stays and the root keeping it."""
from __future__ import annotations

import json
import re
from pathlib import Path


def test_a_failed_verify_is_marked_with_a_cross_not_a_check(project: Path, doit) -> None:  # noqa: ANN001
    recipe = project / "recipes/demo.toml"
    text = recipe.read_text()
    assert '["demo::native::add_kernel*"]' in text
    recipe.write_text(text.replace('["demo::native::add_kernel*"]',
                                   '["demo::native::add_kernel*", "demo::no_such_symbol*"]'))
    res = doit("build")
    assert res.returncode == 1, res.output
    assert re.search(r"^✗ verify\s+\d+\.\ds", res.stderr, re.M), res.stderr
    assert not re.search(r"^✓ verify", res.stderr, re.M), res.stderr
    assert re.search(r"^✓ build\s+\d+\.\ds", res.stderr, re.M), res.stderr  # what went well
    assert "failed:" in res.stderr


def test_plan_prints_a_short_summary_and_the_derivation_on_request(doit) -> None:  # noqa: ANN001
    short = doit("plan")
    assert short.returncode == 0, short.output
    assert '"builder"' not in short.stderr and "derivation=1" in short.stderr
    assert len(short.stderr.splitlines()) <= 15, short.stderr
    assert re.match(r"^demo relwithdebinfo [0-9a-f]{40}\n  build would: build", short.stderr)
    full = doit("plan", "derivation=1")
    assert full.returncode == 0 and '"builder": "cmake"' in full.stderr, full.output
    data = json.loads(doit("plan", "format=json").stdout)
    assert data["derivation"]["builder"] == "cmake"
    bad = doit("plan", "derivation=maybe")
    assert bad.returncode == 2 and "derivation" in bad.stderr
