"""The nightly bot on the demo: matrix build, smoke tests through the env script, push to a
file:// cache with a real signature, reports with history; a failing cell fails the run."""
from __future__ import annotations

import json
import os
from pathlib import Path

from conftest import run_doit

CONFIG = """
push = true
history = 5

[[matrix]]
recipe = "demo"
variants = ["relwithdebinfo", "release"]
smoke = ["python -c 'import demo; assert demo.build_type() == \\"{build_type}\\"'"]

[[matrix]]
recipe = "demo"
variants = ["debug"]
requires_gpu = true
smoke = ["nvidia-smi"]
"""


def cache_env(tmp_path: Path, project: Path) -> dict[str, str]:
    keys = tmp_path / "keys"
    res = run_doit(project, "cache-keygen", "name=bot-test", env={"ORCH_CACHE_KEY_DIR": str(keys)})
    assert res.returncode == 0, res.output
    public = res.stdout.strip().splitlines()[-1]
    cache = tmp_path / "cache"
    cache.mkdir()
    cfg = tmp_path / "cache.toml"
    cfg.write_text(f'[cache]\nsubstituters = ["file://{cache}"]\ntrusted-keys = ["{public}"]\n')
    return {"ORCH_CACHE_CONFIG": str(cfg), "ORCH_CACHE_SIGNING_KEY": str(keys / "bot-test.secret"),
            "ORCH_CACHE_KEY_DIR": str(keys)}


def test_nightly_builds_smokes_pushes_and_reports(project, store, tmp_path):
    (project / "nightly.toml").write_text(CONFIG)
    env = cache_env(tmp_path, project)
    reports = tmp_path / "reports"
    res = run_doit(project, "nightly", f"store={store}", f"reports={reports}", env=env)
    assert res.returncode == 0, res.output
    [report] = reports.glob("nightly-*.json")
    run = json.loads(report.read_text())
    cells = {(c["recipe"], c["variant"]): c for c in run["cells"]}
    assert cells[("demo", "relwithdebinfo")]["status"] == "ok"
    assert cells[("demo", "release")]["smoke"][0]["exit"] == 0
    if not os.path.exists("/dev/nvidia0"):
        assert cells[("demo", "debug")]["status"] == "skipped"
    for v in ("relwithdebinfo", "release"):
        pushed = cells[("demo", v)]["pushed"]
        record = Path(pushed["url"][len("file://"):]) / "ac" / f"{cells[('demo', v)]['id']}.json"
        assert record.is_file(), record
    # A second run with a failing smoke test: exit 1, both runs in the history.
    (project / "nightly.toml").write_text(CONFIG.replace('== \\"{build_type}\\"', '== \\"Nope\\"'))
    res = run_doit(project, "nightly", f"store={store}", f"reports={reports}", "push=0", env=env)
    assert res.returncode == 1, res.output
    assert "2 cell(s) failed" in res.stderr and "demo/release (smoke)" in res.stderr
    history = json.loads((reports / "history.json").read_text())
    assert [h["ok"] for h in history] == [True, False]
    index = (reports / "index.md").read_text()
    assert "| demo/release | failed (smoke) |" in index and "| demo/release | ok |" in index


def test_bad_bot_config_is_one_line(project, store, tmp_path):
    (project / "nightly.toml").write_text("[[matrix]]\nrecipe = 'demo'\nvariants = []\n")
    res = run_doit(project, "nightly", f"store={store}")
    assert res.returncode == 2
    assert "nightly.toml: matrix.0.variants" in res.stderr and "Traceback" not in res.output
