"""The nightly bot tracks performance: a cell's `bench = [...]` runs each night in the cell's
artifact, its samples are stored per night, the report plots the medians over the nights and
flags a night slower than the previous one beyond noise, naming the range. The slower night is
real: the recipe's release variant is changed to do twice the work (benchkernel)."""
from __future__ import annotations

import json
from pathlib import Path

from conftest import run_doit

CONFIG = """
[[matrix]]
recipe = "benchkernel"
variants = ["release"]
bench = ["benchkernel", "10"]
bench_metric = "cpu_seconds"
bench_rounds = 6
bench_allow_noisy = true
"""


def night(project: Path, store: Path, reports: Path, run: str) -> dict:
    for args in (("cell=benchkernel/release",), ("report",)):
        res = run_doit(project, "nightly", *args, f"run={run}", f"store={store}",
                       f"reports={reports}")
        assert res.returncode == 0, res.output
    merged = json.loads((reports / f"nightly-{run}.json").read_text())
    return merged | {"output": res.output}


def test_a_slower_night_is_flagged_with_its_range(project, store, tmp_path) -> None:
    (project / "nightly.toml").write_text(CONFIG)
    reports = tmp_path / "reports"
    first = night(project, store, reports, "n1")
    [c1] = first["cells"]
    assert c1["status"] == "ok" and len(c1["bench"]["samples"]) == 6 and c1["perf"] is None
    recipe = project / "recipes" / "benchkernel.toml"
    recipe.write_text(recipe.read_text().replace(
        '[variants.release]\nbuild_type = "Release"\n',
        '[variants.release]\nbuild_type = "Release"\ndefines = { BENCHKERNEL_WORK = "2" }\n'))
    second = night(project, store, reports, "n2")
    [c2] = second["cells"]
    assert c2["id"] != c1["id"]
    perf = c2["perf"]
    assert perf["regression"] and perf["verdict"] == "slower" and perf["ci"][0] > 1.0, perf
    assert perf["against"] == "n1" and perf["range"] == f"artifacts {c1['id'][:12]}..{c2['id'][:12]}"
    assert "PERF REGRESSION" in second["output"]
    history = json.loads((reports / "history.json").read_text())
    assert [len(h["cells"][0]["bench"]["samples"]) for h in history] == [6, 6]
    html = (reports / "index.html").read_text()
    assert "id='plot-bench'" in html and "perf-regression" in html and "PERF REGRESSION" in html
