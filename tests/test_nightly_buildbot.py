"""The nightly bot on a real CI engine: `doit nightly buildbot` writes master.cfg; a real
Buildbot master (buildbot create-master / start) and two real buildbot-worker processes on
127.0.0.1, one tagged gpu, run a forced night; Buildbot's own REST API (/api/v2) shows each
cell built on the right worker and the report step run, whose report is on disk. The GitHub
Actions workflow in docs/ is checked against the GitHub workflow JSON schema (the copy
vendored by check-jsonschema, offline)."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from conftest import REPO, copy_project, make_store, run_doit

BIN = Path(sys.executable).parent
SMOKE = "python -c 'import cext; assert cext.dot([1.0, 2.0], [3.0, 4.0]) == 11.0'"
CONFIG = """
[[matrix]]
recipe = "cext"
variants = ["relwithdebinfo"]
smoke = ["{smoke}"]

[[matrix]]
recipe = "cext"
variants = ["release"]
requires_gpu = true
smoke = ["{smoke}"]

[buildbot]
workers = [{{name = "cpu1", tags = ["cpu"]}}, {{name = "gpu1", tags = ["gpu"]}}]
interface = "127.0.0.1"
worker_port = {pb}
www_port = {www}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api(www: int, path: str, body: dict | None = None) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{www}/api/v2/{path}",
                                 data=json.dumps(body).encode() if body else None,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def wait_for(what: str, check, timeout: float):  # noqa: ANN001,ANN201 - a predicate
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (value := check()):
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_buildbot_master_and_two_workers_run_a_night(tmp_path, session_toolchain):
    project = copy_project(tmp_path / "project")
    store = make_store(tmp_path / "store", session_toolchain)
    reports, master = tmp_path / "reports", tmp_path / "master"
    pb, www = free_port(), free_port()
    (project / "nightly.toml").write_text(CONFIG.format(pb=pb, www=www, smoke=SMOKE))
    res = run_doit(project, "nightly", "buildbot", f"store={store}", f"reports={reports}",
                   f"master={master}")
    assert res.returncode == 0, res.output
    assert (master / "master.cfg").is_file() and "ORCH_BUILDBOT_WORKER_PASSWORD" in (master / "master.cfg").read_text()
    env = {**{k: v for k, v in os.environ.items() if k not in ("ORCH_STORE", "MAX_JOBS")},
           "ORCH_BUILDBOT_WORKER_PASSWORD": "test-pw"}

    def sh(*cmd: str) -> None:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert proc.returncode == 0, (cmd, proc.stdout[-3000:], proc.stderr[-3000:])

    sh(str(BIN / "buildbot"), "create-master", "-q", str(master))
    workers = {name: tmp_path / f"worker-{name}" for name in ("cpu1", "gpu1")}
    started: list[list[str]] = []
    try:
        sh(str(BIN / "buildbot"), "start", str(master))
        started.append([str(BIN / "buildbot"), "stop", str(master)])
        for name, wdir in workers.items():
            sh(str(BIN / "buildbot-worker"), "create-worker", "-q", str(wdir), f"127.0.0.1:{pb}", name, "test-pw")
            sh(str(BIN / "buildbot-worker"), "start", str(wdir))
            started.append([str(BIN / "buildbot-worker"), "stop", str(wdir)])
        wait_for("both workers connected", lambda: all(
            w["connected_to"] for w in api(www, "workers")["workers"]) and
            len(api(www, "workers")["workers"]) == 2, 60)
        builders = {b["name"]: b for b in api(www, "builders")["builders"]}
        assert set(builders) == {"nightly", "cext@relwithdebinfo", "cext@release"}
        assert builders["cext@release"]["tags"] == ["nightly", "gpu"]
        assert builders["cext@relwithdebinfo"]["tags"] == ["nightly", "cpu"]
        # Force a night through the REST API's control endpoint (JSON-RPC).
        forced = api(www, "forceschedulers/force", {"jsonrpc": "2.0", "method": "force", "id": 1,
                                                     "params": {"builderid": str(builders["nightly"]["builderid"])}})
        assert "result" in forced, forced
        night = wait_for("the nightly build to finish", lambda: next(
            (b for b in api(www, f"builds?builderid={builders['nightly']['builderid']}&property=*")["builds"]
             if b["complete"]), None), 600)
        workers_by_id = {w["workerid"]: w["name"] for w in api(www, "workers")["workers"]}
        builds = {b["builderid"]: b for b in api(www, "builds?property=*")["builds"]}
        run = night["properties"]["nightly_run"][0]
        for name, expect in (("cext@relwithdebinfo", "cpu1"), ("cext@release", "gpu1")):
            b = builds[builders[name]["builderid"]]
            assert b["complete"] and b["results"] == 0, (name, b)
            assert workers_by_id[b["workerid"]] == expect and b["properties"]["workername"][0] == expect
            assert b["properties"]["nightly_run"][0] == run
        steps = {s["name"]: s for s in api(www, f"builds/{night['buildid']}/steps")["steps"]}
        assert steps["cells"]["results"] == 0 and steps["report"]["results"] == 0, steps
        assert night["results"] == 0
    finally:
        for cmd in reversed(started):
            subprocess.run(cmd, env=env, capture_output=True, timeout=60)
    # The report step published the night: every cell's result, merged, on disk.
    merged = json.loads((reports / f"nightly-{run}.json").read_text())
    cells = {c["cell"]: c for c in merged["cells"]}
    assert cells["cext/relwithdebinfo"]["state"] == "ok" and cells["cext/relwithdebinfo"]["smoke"][0]["exit"] == 0
    assert cells["cext/release"]["state"] in ("ok", "nogpu")  # built and verified either way
    assert cells["cext/release"]["id"] and (reports / "index.html").is_file()


def test_buildbot_config_checks_worker_tags(project, store, tmp_path):
    (project / "nightly.toml").write_text(CONFIG.format(pb=9989, www=8010, smoke=SMOKE).replace(
        '{name = "gpu1", tags = ["gpu"]}', '{name = "cpu2", tags = ["cpu"]}'))
    res = run_doit(project, "nightly", "buildbot", f"store={store}", f"master={tmp_path / 'm'}")
    assert res.returncode == 2 and "Traceback" not in res.output
    assert "cell cext/release needs a worker tagged gpu; buildbot.workers has none" in res.stderr
    assert not (tmp_path / "m").exists()
    (project / "nightly.toml").write_text(CONFIG.split("[buildbot]")[0].format(smoke=SMOKE))
    res = run_doit(project, "nightly", "buildbot", f"store={store}", f"master={tmp_path / 'm'}")
    assert res.returncode == 2 and "nightly.toml has no [buildbot] section" in res.stderr


def test_github_workflow_matches_the_workflow_schema(tmp_path):
    exe = shutil.which("check-jsonschema", path=str(BIN))
    assert exe, "check-jsonschema is missing: run ./bootstrap.sh"
    workflow = REPO / "docs" / "nightly-github-actions.yml"
    proc = subprocess.run([exe, "--builtin-schema", "vendor.github-workflows", str(workflow)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The same check fails a workflow the schema forbids (a job without runs-on or uses).
    bad = tmp_path / "bad.yml"
    bad.write_text(workflow.read_text().replace("    runs-on: [self-hosted, linux, debian-12]\n    outputs:",
                                                "    outputs:", 1))
    assert bad.read_text() != workflow.read_text()
    proc = subprocess.run([exe, "--builtin-schema", "vendor.github-workflows", str(bad)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
