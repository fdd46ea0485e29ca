"""Start-up of a no-op `doit build` and of `doit switch` (issue 12): the totals against
their baselines, and where the time of one process goes. Not a test: nothing asserts a time.

Totals are sampled interleaved (one sample of every command per round), so a change in the
machine's load hits baseline and measure alike; each is the median over the rounds:

  python -c pass / python + import doit / `doit list`   what any doit command pays
  ninja no-op in the artifact's build tree              ninja's own no-op
  `ln -sfn` + rename                                    the switch's baseline
  no-op `doit build`, `doit switch` (demo)              ours (answered by the plan memo)
  the same with ORCH_PLAN_MEMO=0                        the full planner, every time
  the same on a PyTorch-sized artifact (--files N more files, written at configure time:
  the source stays small, as a pinned archive's identity does not walk its tree)
  with --base-rev REV: the two measures once more with the orchestrator package of REV

The shares come from one process that runs the no-op build's and the switch's steps one by
one (imports, settings, plan: recipe + lock, machine check, source identity; store lookup,
toolchain, profile flip), plus what those steps cost before issue 12's cuts (the probes run
again, the toolchain's files lstat()ed).

Run: .venv/bin/python benchmarks/startup.py [--rounds 5] [--files 12000] [--base-rev HEAD~3]
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from conftest import copy_project, run_doit  # noqa: E402

# N small headers in 500-file directories of the build tree, installed: the artifact gets
# PyTorch's order of file count (its include/ and python package) without a big source.
PADDED_CMAKE = """
foreach(i RANGE 1 {files})
  math(EXPR group "${{i}} / 500")
  file(WRITE "${{CMAKE_BINARY_DIR}}/many/d${{group}}/f${{i}}.h" "// ${{i}}\\n")
endforeach()
install(DIRECTORY "${{CMAKE_BINARY_DIR}}/many/" DESTINATION share/many)
"""

# One process doing a no-op build's and a switch's steps, each timed (run in the project).
SHARES = r"""
import json, sys, time
from pathlib import Path
t = [time.perf_counter()]
out = {}
def lap(name):
    t.append(time.perf_counter()); out[name] = t[-1] - t[-2]
import doit.doit_cmd, doit.loader; lap("import doit")
sys.path.insert(0, "."); import dodo; lap("import dodo.py (glue, tasks)")
import orchestrator.verbs.build, orchestrator.verbs.switch; lap("import the verbs (realise, plan, models)")
from orchestrator.toolchain import machine_check
from orchestrator.plan import derivation as planmod
from orchestrator.toolchain import materialize as tc
from orchestrator.store import tree_manifest
from orchestrator.lock.files import load_lock
from orchestrator.model.recipe import load_recipe, resolve_variant
from orchestrator.realise.reverify import reverify_if_rules_changed
from orchestrator.config.settings import Settings
from orchestrator.sources.prepare import prepare_source
from orchestrator.store.artifacts import Store
from orchestrator.workspace.profiles import Workspace
lap("import the rest")
s = Settings.from_vars(Path(".").absolute(), json.loads(sys.argv[1])); lap("settings")
store = Store(s.store_root)
recipe = load_recipe(s.recipes_dir, s.recipe); variant = resolve_variant(recipe, s.variant, where="")
lock = load_lock(s.locks_dir, recipe.lock); keys = planmod.used_keys(recipe); lap("plan: recipe + lock")
stats, probes = machine_check.machine_cache(store), machine_check.probe_cache(store)
machine_check.check_machine(lock, keys, stats, save=False, probes=probes); lap("plan: machine check")
source = prepare_source(s, recipe, store); lap("plan: source identity")
inputs = {k: lock.entries[k] for k in keys}
aid = planmod.artifact_id_of(planmod.derivation_of(recipe, variant, inputs, source.identity))
lap("plan: derivation + id")
p = planmod.make_plan(s, store); found = store.find(aid); t.append(time.perf_counter())
reverify_if_rules_changed(s, store, p, found); lap("store lookup + verify rules")
linked = tc.linked_toolchain(store, lock); lap("switch: toolchain (linked)")
ws = Workspace(s.workspace); ws.switch(found, store, linked.root, recipe.outputs.model_dump())
lap("switch: profile links")
machine_check._PYTHON_PROBES.clear()
machine_check.check_machine(lock, keys, stats, save=False); lap("before: machine check, probes run")
tc.check_toolchain(linked.root); lap("before: toolchain files lstat()ed")
print(json.dumps(out))
"""


def sample(cmds: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Median wall time of each command, sampled interleaved over `rounds` rounds."""
    samples: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(rounds):
        for name, fn in cmds.items():
            t0 = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t0)
    return {name: statistics.median(v) for name, v in samples.items()}


def ln_rename(targets: list[Path], link: Path) -> Callable[[], object]:
    """The switch's baseline: `ln -sfn` to a temp name, then a rename over `link`, cycling
    through `targets`."""
    cycle = itertools.cycle(targets)

    def flip() -> None:
        checked(["ln", "-sfn", str(next(cycle)), f"{link}.tmp"])
        os.rename(f"{link}.tmp", link)

    return flip


def checked(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{res.stdout[-2000:]}{res.stderr[-2000:]}")
    return res.stdout


def doit_cmd(project: Path, *args: str, pythonpath: str | None = None,
             memo: bool = True) -> Callable[[], object]:
    env = {k: v for k, v in os.environ.items() if k not in ("ORCH_STORE", "MAX_JOBS")}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    if not memo:
        env["ORCH_PLAN_MEMO"] = "0"  # the full planner every time (plan_memo.py)
    argv = [sys.executable, "-m", "doit", "-f", str(project / "dodo.py"), *args]
    return lambda: checked(argv, cwd=project, env=env)


def project_with_files(dest: Path, files: int) -> Path:
    project = copy_project(dest)
    if files:
        cml = project / "recipes/demo/CMakeLists.txt"
        cml.write_text(cml.read_text() + PADDED_CMAKE.format(files=files))
    return project


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--files", type=int, default=12000, help="files in the PyTorch-sized demo")
    ap.add_argument("--base-rev", help="also time the package of this git revision")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="orch-startup-"))
    store, ws, ws_big = work / "store", work / "ws", work / "ws-big"
    s = f"store={store}"
    try:
        small = project_with_files(work / "small", 0)
        big = project_with_files(work / "big", args.files)
        for project in (small, big):
            for variant in ("relwithdebinfo", "release"):
                res = run_doit(project, "build", s, "substitute=0", f"variant={variant}",
                               timeout=3600)  # the first one materializes the toolchain
                if res.returncode != 0:
                    raise SystemExit(f"build failed:\n{res.output[-3000:]}")
        ws.mkdir()
        ws_big.mkdir()
        base = None
        if args.base_rev:
            base = work / "base"
            base.mkdir()
            tar = subprocess.run(["git", "-C", str(REPO), "archive", args.base_rev, "orchestrator"],
                                 capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", str(base)], input=tar, check=True)
        (build_dir,) = [d for d in (store / "build").glob("demo-relwithdebinfo-*")
                        if (d / ".orch-src").resolve() == (small / "recipes/demo").resolve()]
        ninja = next(p for p in (store / "toolchains").iterdir() if (p / "venv").is_dir()) / "venv/bin/ninja"
        def flips(project: Path, w: Path, pythonpath: str | None = None,
                  memo: bool = True) -> Callable[[], object]:
            a = doit_cmd(project, "switch", s, f"workspace={w}", "variant=release",
                         pythonpath=pythonpath, memo=memo)
            b = doit_cmd(project, "switch", s, f"workspace={w}", pythonpath=pythonpath, memo=memo)
            return lambda: (a(), b())

        cmds: dict[str, Callable[[], object]] = {
            "python -c pass": lambda: checked([sys.executable, "-c", "pass"]),
            "python + import doit": lambda: checked([sys.executable, "-c", "import doit.doit_cmd"]),
            "doit list": doit_cmd(small, "list"),
            "ninja no-op (build tree)": lambda: checked([str(ninja), "-C", str(build_dir)]),
            "ln -sfn + rename": ln_rename([small, big], work / "profile"),
            "no-op doit build": doit_cmd(small, "build", s),
            "doit switch (x2)": flips(small, ws),
            "no-op doit build, memo off": doit_cmd(small, "build", s, memo=False),
            "doit switch (x2), memo off": flips(small, ws, memo=False),
            f"no-op doit build, {args.files} files": doit_cmd(big, "build", s),
            f"doit switch (x2), {args.files} files": flips(big, ws_big),
        }
        if base is not None:
            cmds[f"no-op doit build @ {args.base_rev}"] = doit_cmd(small, "build", s, pythonpath=str(base))
            cmds[f"doit switch (x2) @ {args.base_rev}"] = flips(small, ws, str(base))
        t = sample(cmds, args.rounds)
        for k in [k for k in t if "(x2)" in k]:
            t[k.replace(" (x2)", "")] = t.pop(k) / 2
        share = {name: shares(project, store, w, args.rounds)
                 for name, project, w in (("demo", small, ws), (f"{args.files} files", big, ws_big))}
        report(t, share, args)
    finally:
        for p in store.rglob("*"):
            if p.is_dir() and not p.is_symlink():
                os.chmod(p, 0o755)
        shutil.rmtree(work, ignore_errors=True)


def shares(project: Path, store: Path, ws: Path, rounds: int) -> dict[str, float]:
    """SHARES in `project`, median of each step over `rounds` processes."""
    runs = [json.loads(checked([sys.executable, "-c", SHARES, json.dumps(
        {"store": str(store), "workspace": str(ws)})], cwd=project)) for _ in range(rounds)]
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def report(t: dict[str, float], share: dict[str, dict[str, float]],
           args: argparse.Namespace) -> None:
    table = Table(title=f"start-up (median of {args.rounds}, interleaved; load {os.getloadavg()[0]:.1f})")
    for col in ("measure", "value", "baseline", "ratio", "goal"):
        table.add_column(col)

    def row(name: str, base: str, goal: str = "") -> None:
        table.add_row(name, f"{t[name]:.3f} s", f"{t[base]:.3f} s ({base})",
                      f"{t[name] / t[base]:.2f}", goal)

    n = args.files
    for name in ("python + import doit", "doit list"):
        row(name, "python -c pass")
    row("no-op doit build", "doit list", "<= 0.3 s")
    row("no-op doit build", "python + import doit", "<= 0.3 s")
    row("no-op doit build", "no-op doit build, memo off", "(the full planner)")
    row(f"no-op doit build, {n} files", "no-op doit build", "ratio ~ 1")
    row("doit switch", "ln -sfn + rename", "<= 0.2 s")
    row("doit switch", "doit switch, memo off", "(the full planner)")
    row("doit switch", "python + import doit")
    row(f"doit switch, {n} files", "doit switch", "ratio ~ 1")
    row("ninja no-op (build tree)", "python -c pass")
    if args.base_rev:
        row("no-op doit build", f"no-op doit build @ {args.base_rev}")
        row("doit switch", f"doit switch @ {args.base_rev}")
    Console(width=150).print(table)
    parts = Table(title="the full planner (a memo miss) in one process, step by step (median s; 'before:' rows "
                        "are what issue 12 cut)")
    parts.add_column("step")
    for name in share:
        parts.add_column(name)
    first = next(iter(share.values()))
    for k in first:
        parts.add_row(k, *(f"{sh[k]:.3f}" for sh in share.values()))
    Console(width=150).print(parts)
    print(json.dumps({"totals": t, "shares": share}))


if __name__ == "__main__":
    main()
