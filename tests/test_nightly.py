"""The nightly bot on the demo, through the real command line: the CI fan-out path (matrix
JSON → cells as separate parallel processes → merged report), the local run (jobs=2), push
to a file:// cache with a real signature, failure reasons in every summary, notify= to a
real HTTP server on 127.0.0.1, and nightly.toml checked completely before anything builds."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from conftest import DoitResult, copy_project, make_store, run_doit

CONFIG = """
push = true
history = 5

[[matrix]]
recipe = "demo"
variants = ["relwithdebinfo", "release"]
smoke = ["python -c 'import demo; assert demo.build_type() == \\"{build_type}\\", demo.build_type()'"]
"""


class Bot:
    """One project copy and store for the module (builds shared between tests)."""

    def __init__(self, root: Path, toolchain: Path) -> None:
        self.root = root
        self.project = copy_project(root / "project")
        self.store = make_store(root / "store", toolchain)
        self.env = cache_env(root, self.project)

    def doit(self, *args: str, reports: Path) -> DoitResult:
        return run_doit(self.project, "nightly", *args, f"store={self.store}", f"reports={reports}",
                        env=self.env)

    def config(self, text: str) -> None:
        (self.project / "nightly.toml").write_text(text)


def cache_env(root: Path, project: Path) -> dict[str, str]:
    keys = root / "keys"
    res = run_doit(project, "cache-keygen", "name=bot-test", env={"ORCH_CACHE_KEY_DIR": str(keys)})
    assert res.returncode == 0, res.output
    public = res.stdout.strip().splitlines()[-1]
    cache = root / "cache"
    cache.mkdir()
    cfg = root / "cache.toml"
    cfg.write_text(f'[cache]\nsubstituters = ["file://{cache}"]\ntrusted-keys = ["{public}"]\n')
    return {"ORCH_CACHE_CONFIG": str(cfg), "ORCH_CACHE_SIGNING_KEY": str(keys / "bot-test.secret"),
            "ORCH_CACHE_KEY_DIR": str(keys)}


@pytest.fixture(scope="module")
def bot(tmp_path_factory, session_toolchain) -> Bot:
    return Bot(tmp_path_factory.mktemp("nightly"), session_toolchain)


class Hook(BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Hook.received.append({"path": self.path, "type": self.headers["Content-Type"],
                              "body": json.loads(body)})
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args) -> None:  # quiet
        pass


def test_fan_out_cells_as_parallel_processes_then_merge_and_notify(bot, tmp_path):
    bot.config(CONFIG)
    reports = tmp_path / "reports"
    res = bot.doit("matrix", "format=json", reports=reports)
    assert res.returncode == 0, res.output
    matrix = json.loads(res.stdout)
    assert [c["cell"] for c in matrix] == ["demo/relwithdebinfo", "demo/release"]
    assert all(c["requires_gpu"] is False and c["runs_on"] == "cpu" for c in matrix)
    # What a CI engine does: one job per matrix entry, at the same time, then one merge.
    procs = [subprocess.Popen(
        [sys.executable, "-m", "doit", "-f", str(bot.project / "dodo.py"), "nightly",
         f"cell={c['recipe']}/{c['variant']}", "run=ci-1", "jobs=1", f"store={bot.store}",
         f"reports={reports}"], cwd=bot.project, env={**os.environ, **bot.env},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for c in matrix]
    outs = [p.communicate(timeout=900)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    cells = sorted(p.name for p in (reports / "runs" / "ci-1" / "cells").iterdir())
    assert cells == ["demo@release.json", "demo@relwithdebinfo.json"]
    server = HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/hook"
        res = bot.doit("report", "run=ci-1", f"notify={url}", reports=reports)
    finally:
        server.shutdown()
    assert res.returncode == 0, res.output
    run = json.loads((reports / "nightly-ci-1.json").read_text())
    assert run["ok"] and [c["cell"] for c in run["cells"]] == ["demo/relwithdebinfo", "demo/release"]
    for c in run["cells"]:
        assert c["status"] == "ok" and c["smoke"][0]["exit"] == 0 and c["glibc"]["GLIBC"]
        record = Path(c["pushed"]["url"][len("file://"):]) / "ac" / f"{c['id']}.json"
        assert record.is_file(), record
    [hook] = Hook.received
    assert hook["path"] == "/hook" and hook["type"] == "application/json"
    assert hook["body"]["run"] == "ci-1" and hook["body"]["ok"] is True
    assert {c["cell"]: c["status"] for c in hook["body"]["cells"]} == {
        "demo/relwithdebinfo": "ok", "demo/release": "ok"}
    # Merging again is idempotent: one history entry for the run.
    assert bot.doit("report", "run=ci-1", reports=reports).returncode == 0
    assert [h["run"] for h in json.loads((reports / "history.json").read_text())] == ["ci-1"]


def test_local_run_in_parallel_and_failure_reasons_everywhere(bot, tmp_path):
    bot.config(CONFIG)
    reports = tmp_path / "reports"
    res = bot.doit("jobs=2", "push=0", reports=reports)
    assert res.returncode == 0, res.output
    assert "2 cells, 2 at a time" in res.stderr
    [first] = reports.glob("nightly-*.json")
    assert json.loads(first.read_text())["ok"]
    assert sorted(p.name for p in next((reports / "runs").iterdir()).joinpath("logs").iterdir()) == [
        "demo@release.log", "demo@relwithdebinfo.log"]
    # A failing smoke test: exit 1, and the reason (the assertion) in every summary.
    bot.config(CONFIG.replace(', demo.build_type()', ', \\"got \\" + demo.build_type()')
               .replace('== \\"{build_type}\\"', '== \\"Nope\\"'))
    res = bot.doit("jobs=2", "push=0", reports=reports)
    assert res.returncode == 1, res.output
    assert "2 cell(s) failed" in res.stderr and "demo/release (smoke)" in res.stderr
    assert "demo/release: failed at smoke: `python -c" in res.stderr
    assert "AssertionError: got Release" in res.stderr
    history = json.loads((reports / "history.json").read_text())
    assert [h["ok"] for h in history] == [True, False]
    index = (reports / "index.md").read_text()
    assert "| demo/release | failed (smoke) | smoke: `python -c" in index
    assert "AssertionError: got Release" in index and "| demo/release | ok |" in index
    latest = json.loads(sorted(reports.glob("nightly-*.json"))[-1].read_text())
    cell = next(c for c in latest["cells"] if c["cell"] == "demo/release")
    assert "AssertionError: got Release" in cell["tail"] and cell["error"].endswith("AssertionError: got Release")


BAD = """
history = 0

[[matrix]]
recipe = "demo"
variants = ["relwithdebinfo", "fast"]
smoke = ["echo {recipe} {commit}"]

[[matrix]]
recipe = "nosuch"
variants = ["release"]

[[matrix]]
recipe = "demo"
variants = ["release"]
track = "main"
"""


def test_config_checked_completely_before_any_cell_runs(bot, tmp_path):
    reports = tmp_path / "reports"
    bot.config(BAD)
    res = bot.doit(reports=reports)
    assert res.returncode == 2 and "Traceback" not in res.output
    assert "history: Input should be greater than or equal to 1" in res.stderr
    assert "matrix.0.smoke: 'echo {recipe} {commit}': unknown placeholder {commit}" in res.stderr
    bot.config(BAD.replace("history = 0", "history = 3").replace(" {commit}", ""))
    before = set((bot.store / "store").glob("*")) if (bot.store / "store").is_dir() else set()
    res = bot.doit(reports=reports)
    assert res.returncode == 2 and "Traceback" not in res.output, res.output
    lines = res.stderr.splitlines()
    assert "nightly.toml: 3 problems; fix the bot config" in lines[0]
    assert "  nightly.toml: matrix.0.variants: recipe 'demo' has no variant 'fast' " \
           "(it has: debug, release, relwithdebinfo)" in lines
    assert any(line.startswith("  nightly.toml: matrix.1.recipe: ") and "nosuch" in line for line in lines)
    assert any("matrix.2.track: recipe 'demo' has a 'path' source" in line for line in lines)
    assert not reports.exists()
    assert (set((bot.store / "store").glob("*")) if (bot.store / "store").is_dir() else set()) == before
    # The same check guards the fan-out forms, and bad words / variables are one line too.
    for args in (("matrix",), ("cell=demo/release",), ("report",)):
        assert bot.doit(*args, reports=reports).returncode == 2
    bot.config(CONFIG)
    for args, msg in ((("cell=demo/fast",), "cell='demo/fast' is not in nightly.toml"),
                      (("cell=demo/release", "run=../x"), "run='../x': use 1-64 letters"),
                      (("report", "notify=ftp://x"), "notify='ftp://x': use an http:// or https:// URL"),
                      (("bogus",), "doit nightly bogus: use `doit nightly`")):
        res = bot.doit(*args, reports=reports)
        assert res.returncode == 2 and msg in res.stderr and "Traceback" not in res.output, res.output


def test_bad_bot_config_is_one_line(project, store, tmp_path):
    (project / "nightly.toml").write_text("[[matrix]]\nrecipe = 'demo'\nvariants = []\n")
    res = run_doit(project, "nightly", f"store={store}")
    assert res.returncode == 2
    assert "nightly.toml: matrix.0.variants" in res.stderr and "Traceback" not in res.output


def test_shipped_github_workflow_uses_what_the_matrix_prints(project, tmp_path):
    """docs/nightly-github-actions.yml reads only keys `doit nightly matrix` emits."""
    import yaml

    repo = Path(__file__).resolve().parents[1]
    workflow = (repo / "docs" / "nightly-github-actions.yml").read_text()
    jobs = yaml.safe_load(workflow)["jobs"]
    assert jobs["cell"]["strategy"]["matrix"]["include"] == "${{ fromJSON(needs.matrix.outputs.cells) }}"
    assert "doit nightly matrix format=json" in jobs["matrix"]["steps"][-1]["run"]
    # The shipped nightly.toml, checked completely (its recipes and variants exist).
    res = run_doit(project, "nightly", "matrix", "format=json", f"config={repo / 'nightly.toml'}",
                   f"store={tmp_path / 'store'}")  # the matrix needs no toolchain
    assert res.returncode == 0, res.output
    assert any(c["requires_gpu"] for c in json.loads(res.stdout))
    keys = set(json.loads(res.stdout)[0])
    used = set(re.findall(r"(?<![\w.])matrix\.([a-z_]+)", workflow))
    assert used and used <= keys, used - keys


GPU_CELL = """
[[matrix]]
recipe = "cudademo"
variants = ["release"]
requires_gpu = true
"""


def test_preflight_before_any_cell_builds(bot, tmp_path):
    """push=1 without a signing key, an unwritable cache, an HTTP cache without credentials, a
    GPU cell on a worker not tagged gpu: one line, exit 2, before anything builds."""
    reports = tmp_path / "reports"
    bot.config(CONFIG)
    before = sorted((bot.store / "store").glob("*")) if (bot.store / "store").is_dir() else []

    def doit(*args: str, **env: str) -> DoitResult:
        return run_doit(bot.project, "nightly", *args, f"store={bot.store}", f"reports={reports}",
                        env={**bot.env, **env})

    cases = [
        ({"ORCH_CACHE_SIGNING_KEY": ""}, "nightly preflight: push needs a signing key: set ORCH_CACHE_SIGNING_KEY"),
        ({"ORCH_CACHE_CONFIG": str(_cache_toml(tmp_path / "gone.toml", "file:///nonexistent/nightly-cache"))},
         "nightly preflight: cache file:///nonexistent/nightly-cache is not writable: "),
        ({"ORCH_CACHE_CONFIG": str(_cache_toml(tmp_path / "http.toml", "http://127.0.0.1:9/cache/")),
          "ORCH_CACHE_TOKEN": "", "ORCH_CACHE_USER": "", "ORCH_CACHE_PASSWORD": ""},
         "nightly preflight: push to http://127.0.0.1:9/cache/ needs write credentials: set ORCH_CACHE_TOKEN"),
    ]
    for i, (env, msg) in enumerate(cases):  # the local run and (once) a CI cell job
        for args in (("push=1",), ("push=1", "cell=demo/release", "run=p1"))[:2 if i == 0 else 1]:
            res = doit(*args, **env)
            assert res.returncode == 2 and "Traceback" not in res.output, res.output
            assert msg in res.stderr and res.stderr.count("\n") == 1, res.stderr
            assert res.stderr.rstrip().endswith("nothing was built"), res.stderr
    bot.config(CONFIG + GPU_CELL)
    res = doit("cell=cudademo/release", "run=p1", "push=0", ORCH_NIGHTLY_WORKER_TAGS="cpu")
    assert res.returncode == 2 and "nightly preflight: cell cudademo/release needs a worker tagged gpu; " \
        "this one is tagged cpu (ORCH_NIGHTLY_WORKER_TAGS)" in res.stderr, res.output
    assert not reports.exists()
    assert (sorted((bot.store / "store").glob("*")) if (bot.store / "store").is_dir() else []) == before


def _cache_toml(path: Path, url: str) -> Path:
    path.write_text(f'[cache]\nsubstituters = ["{url}"]\n')
    return path


def test_shipped_pytorch_nightly_configs_are_valid(project, tmp_path):
    """nightly-pytorch.toml (the whole tree, by hand) and nightly-pytorch-c10.toml (its CI
    form on the c10 slice): checked completely (recipes and variants exist) by the verb."""
    import tomllib

    from orchestrator.model.nightly import NightlyConfig

    repo = Path(__file__).resolve().parents[1]
    for name, targets in (("nightly-pytorch.toml", []), ("nightly-pytorch-c10.toml", ["c10"])):
        res = run_doit(project, "nightly", "matrix", "format=json", f"config={repo / name}",
                       f"store={tmp_path / 'store'}")
        assert res.returncode == 0, res.output
        assert [c["cell"] for c in json.loads(res.stdout)] == ["pytorch2/relwithdebinfo", "pytorch2/release"]
        config = NightlyConfig.model_validate(tomllib.loads((repo / name).read_text()))
        [entry] = config.matrix
        assert config.push and "abi" in config.fail_on and entry.targets == targets
        smoke = " ".join(entry.smoke)
        if targets:
            assert "libc10.so" in smoke
        else:
            assert "import torch" in smoke and "m(torch.randn(8, 64))" in smoke
            assert entry.bench and entry.bench_metric == "median"


def test_parallel_cells_write_their_own_preflight_probe():
    """A night's cells run at once (one CI job each) and each writes and reads back a probe on the
    push URL: one shared key let one cell read the other's probe and refuse the night (seen in
    the fan-out test above). Keys differ per cell set, and stay the same night after night."""
    from orchestrator.bot.matrix import Cell
    from orchestrator.bot.preflight import cells_probe_key
    rwdi, rel = (Cell("demo", v, False, None, 600.0) for v in ("relwithdebinfo", "release"))
    keys = {cells_probe_key([rwdi]), cells_probe_key([rel]), cells_probe_key([rwdi, rel])}
    assert len(keys) == 3 and all(k.startswith("checks/nightly-preflight-") for k in keys)
    assert cells_probe_key([rel, rwdi]) == cells_probe_key([rwdi, rel])
    assert cells_probe_key([rel]) == cells_probe_key([rel])
