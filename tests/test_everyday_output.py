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


def test_status_verify_and_gc_fit_80_columns_and_say_what_stays(doit, project: Path) -> None:  # noqa: ANN001
    w = f"workspace={project}"
    for v in ("relwithdebinfo", "release"):
        assert doit("switch", f"variant={v}", w).returncode == 0
    data = json.loads(doit("status", w, "format=json").stdout)
    ids = [a["id"] for a in data["artifacts"]]
    assert len(ids) == 2 and all(len(i) == 40 for i in ids)           # JSON: whole ids
    assert all(len(g["artifact"]) > 40 for g in data["generations"])

    human = doit("status", w)                   # not a terminal: rich's 80 columns
    assert human.returncode == 0, human.output
    lines = human.stderr.splitlines()
    tables = [ln for ln in lines if "/" not in ln]  # the paths' lines are not table rows
    assert len(tables) >= 6 and all(len(ln) <= 80 for ln in tables), human.stderr
    for a in data["artifacts"]:
        short, date = a["id"][:12], a["date"]
        store_rows = lines[next(i for i, ln in enumerate(lines) if ln.startswith("store ")):]
        row = [ln for ln in store_rows if re.search(rf"\b{short}\b", ln) and date in ln]
        assert len(row) == 1, (short, date, human.stderr)              # id and date whole, one line
        assert a["id"][:13] not in human.stderr.split("active:")[1].split("\n", 1)[1]
    act = data["active"]["id"]
    assert re.search(rf"^\*\s+2\s+\d{{4}}-\d\d-\d\d \d\d:\d\d\s+{act[:12]}-demo-release\s*$",
                     human.stderr, re.M), human.stderr             # generations: 12-digit ids

    res = doit("verify", w)
    assert res.returncode == 0, res.output
    active = Path(data["active"]["path"])
    headers = [ln for ln in res.stderr.splitlines() if ln.startswith(f"verify {active.name}")]
    assert headers == [f"verify {active.name} PASS",
                       f"verify {active.name}: all checks passed (3 ELF files)"], res.stderr

    res = doit("gc", "dry_run=1", w, "format=json")     # the default keep=2: both stay
    plan = json.loads(res.stdout)
    assert not [d for d in plan["deleted"] if d["kind"] == "artifact"], plan["deleted"]
    res = doit("gc", "dry_run=1", "keep=1", w, "format=json")
    plan = json.loads(res.stdout)
    [other] = [i for i in ids if i != act]
    assert [Path(d["path"]).name[:40] for d in plan["deleted"] if d["kind"] == "artifact"] \
        == [other]
    kept = {Path(k["path"]).name: k["roots"] for k in plan["kept"]}
    assert kept == {active.name: [f"{project} generation 2 (active)"]}, kept
    res = doit("gc", "dry_run=1", "keep=1", w)
    assert f"  artifact: {active.name[:12]}-demo-release (kept by {project} generation 2 " \
           "(active))" in res.stderr, res.stderr
    assert "gc: would keep 1 artifact(s)" in res.stderr
