"""`doit nightly buildbot`: a Buildbot master configuration (master.cfg) written from
nightly.toml's matrix and its [buildbot] section.

One builder per cell (named by the cell's key, `recipe@variant`, tagged `nightly` and its
`cpu`/`gpu`), each one step: `doit nightly cell=R/V run=<the night's run>`; cpu cells only
on workers tagged `cpu`, GPU cells only on workers tagged `gpu` (a gpu worker takes
`gpu_max_builds` builds at a time, one by default, as LLVM's GPU builders do); every cell
step gets ORCH_NIGHTLY_WORKER_TAGS (the worker's tags, checked by the cell's preflight).
The `nightly` builder (on a worker tagged cpu only) names the run, triggers every cell
builder, waits, and runs the final `report` step (`doit nightly report run=...`, always).
Schedulers: Nightly (hour:minute UTC), a ForceScheduler `force` and the Triggerable.

The workers run the project where it was generated (the same path, the same interpreter:
one machine or a shared file system) and share the reports directory. Their password comes
from ORCH_BUILDBOT_WORKER_PASSWORD in the master's environment, never from a file.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from orchestrator.bot.matrix import Cell, config_path
from orchestrator.config.settings import Settings
from orchestrator.errors import UserError
from orchestrator.fs import write_atomic
from orchestrator.model.nightly import BuildbotConfig, NightlyConfig

PASSWORD_ENV = "ORCH_BUILDBOT_WORKER_PASSWORD"
COORDINATOR = "nightly"

MASTER_CFG = '''\
# Written by `doit nightly buildbot` from {config}; regenerate it instead of editing.
# Workers: `buildbot-worker create-worker DIR HOST:{worker_port} NAME "${pw}"`, NAME one of
# {names}. The master needs {pw} in its environment.
import datetime
import json
import os

from buildbot.plugins import schedulers, steps, util, worker

SPEC = json.loads({spec!r})
PASSWORD = os.environ.get("{pw}", "")
if not PASSWORD:
    raise RuntimeError("set {pw} (the workers' password) in the master's environment")


def doit(*args):
    return [SPEC["python"], "-m", "doit", "-f", SPEC["dodo"], "nightly", *args,
            "config=" + SPEC["config"], "store=" + SPEC["store"], "reports=" + SPEC["reports"]]


@util.renderer
def run_id(props):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return "%s-b%s" % (now, props.getProperty("buildnumber"))


RUN = util.Interpolate("run=%(prop:nightly_run)s")
c = BuildmasterConfig = {{}}
c["title"] = "orchestrator nightly"
c["buildbotNetUsageData"] = None  # no usage report leaves the master
c["buildbotURL"] = "http://localhost:%d/" % SPEC["www_port"]
c["db"] = {{"db_url": "sqlite:///state.sqlite"}}
c["protocols"] = {{"pb": {{"port": SPEC["pb_port"]}}}}
c["www"] = {{"port": SPEC["www_strport"], "plugins": {{}}}}
c["workers"] = [
    worker.Worker(w["name"], PASSWORD, properties={{"worker_tags": ",".join(w["tags"])}},
                  max_builds=SPEC["gpu_max_builds"] if "gpu" in w["tags"] else None)
    for w in SPEC["workers"]]
cpu_cells = util.WorkerLock("nightly-cpu-cells", maxCount=SPEC["cpu_cells_at_a_time"])
c["builders"] = []
for cell in SPEC["cells"]:
    tag = "gpu" if cell["requires_gpu"] else "cpu"
    f = util.BuildFactory()
    f.addStep(steps.ShellCommand(
        name="cell", description="nightly cell " + cell["cell"], workdir=SPEC["repo"],
        command=doit("cell=" + cell["cell"], RUN), timeout=SPEC["silence_s"],
        env={{"ORCH_NIGHTLY_WORKER_TAGS": util.Property("worker_tags"), "PYTHONUNBUFFERED": "1"}}))
    c["builders"].append(util.BuilderConfig(
        name=cell["key"], factory=f, tags=["nightly", tag],
        workernames=[w["name"] for w in SPEC["workers"] if tag in w["tags"]],
        locks=[] if tag == "gpu" else [cpu_cells.access("counting")]))
night = util.BuildFactory()
night.addStep(steps.SetProperty(name="run", property="nightly_run", value=run_id))
night.addStep(steps.Trigger(name="cells", schedulerNames=["nightly-cells"], waitForFinish=True,
                            set_properties={{"nightly_run": util.Property("nightly_run")}},
                            haltOnFailure=False, flunkOnFailure=True))
night.addStep(steps.ShellCommand(name="report", workdir=SPEC["repo"], alwaysRun=True,
                                 command=doit("report", RUN), timeout=SPEC["silence_s"]))
c["builders"].append(util.BuilderConfig(
    name="{coordinator}", factory=night, tags=["nightly"],
    workernames=[w["name"] for w in SPEC["workers"] if w["tags"] == ["cpu"]]))
c["schedulers"] = [
    schedulers.Triggerable(name="nightly-cells", builderNames=[x["key"] for x in SPEC["cells"]]),
    schedulers.Nightly(name="nightly", builderNames=["{coordinator}"], hour=SPEC["hour"],
                       minute=SPEC["minute"]),
    schedulers.ForceScheduler(name="force", builderNames=["{coordinator}"]),
]
'''


def worker_problems(bb: BuildbotConfig, cells: list[Cell]) -> list[str]:
    """Every cell needs a worker with its tag; the nightly builder one tagged cpu only."""
    tags = {t for w in bb.workers for t in w.tags}
    out = [f"cell {c.name} needs a worker tagged {t}; buildbot.workers has none"
           for c in cells for t in ["gpu" if c.requires_gpu else "cpu"] if t not in tags]
    if not any(w.tags == ["cpu"] for w in bb.workers):
        out.append("the nightly builder (trigger and report) needs a worker tagged [\"cpu\"] only "
                   "(a gpu worker takes gpu_max_builds builds at a time)")
    names = [w.name for w in bb.workers]
    out += [f"worker {n} is listed twice" for n in sorted({n for n in names if names.count(n) > 1})]
    return out


def render(settings: Settings, config: NightlyConfig, cells: list[Cell], reports: Path) -> str:
    bb = config.buildbot
    assert bb is not None
    where = f":interface={bb.interface}" if bb.interface else ""
    spec: dict[str, Any] = {
        "python": sys.executable, "dodo": str(settings.repo_root.absolute() / "dodo.py"),
        "repo": str(settings.repo_root.absolute()), "config": str(config_path(settings).absolute()),
        "store": str(Path(settings.store_root).absolute()), "reports": str(reports),
        "pb_port": f"tcp:{bb.worker_port}{where}", "www_port": bb.www_port,
        "www_strport": f"tcp:{bb.www_port}{where}", "hour": bb.hour, "minute": bb.minute,
        "gpu_max_builds": bb.gpu_max_builds, "cpu_cells_at_a_time": bb.cpu_cells_at_a_time,
        "silence_s": 4 * 3600, "workers": [w.model_dump() for w in bb.workers],
        "cells": [c.as_json() for c in cells]}
    return MASTER_CFG.format(config=config_path(settings).name, worker_port=bb.worker_port,
                             names=", ".join(w.name for w in bb.workers), pw=PASSWORD_ENV,
                             spec=json.dumps(spec, sort_keys=True), coordinator=COORDINATOR)


def write_master(settings: Settings, config: NightlyConfig, cells: list[Cell]) -> Path:
    """<master=DIR, default <reports>/buildbot>/master.cfg (atomically); UserError when the
    [buildbot] section is missing or cannot place every cell."""
    where = config_path(settings).name
    if config.buildbot is None:
        raise UserError(f"{where} has no [buildbot] section; add one with workers = "
                        "[{name = \"w1\", tags = [\"cpu\"]}, ...] (docs/nightly.md)")
    problems = worker_problems(config.buildbot, cells)
    if problems:
        raise UserError(f"{where}: buildbot: " + "; ".join(problems))
    reports = Path(settings.vars.get("reports") or Path(settings.store_root) / "reports").expanduser().absolute()
    master = Path(settings.vars.get("master") or reports / "buildbot").expanduser().absolute()
    if not master.parent.is_dir():
        raise UserError(f"master={master}: its parent directory does not exist; create it first")
    master.mkdir(exist_ok=True)
    path = master / "master.cfg"
    write_atomic(path, render(settings, config, cells, reports))
    return path
