"""What the PyTorch edit-loop benchmarks share (pytorch_c10_edit.py, pytorch_edit_loop.py): a
git checkout of a recipe's pinned tree, `doit build source=<checkout>` timed with its phase
lines, the build tree of its artifact, its ninja run alone as a developer would, and the steps a
ninja run appended to the tree's .ninja_log. Not a benchmark itself."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# A phase line of doit's output: `✓ build      12.3s`, `✓ install caffe2    1.0s`.
PHASE = re.compile(r"✓ ([a-z][\w. /-]*?)\s+([\d.]+)s")

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}


def doit_env() -> dict[str, str]:
    """The caller's environment less what would pick another store or job count."""
    return {k: v for k, v in os.environ.items() if k not in ("ORCH_STORE", "MAX_JOBS")}


def doit(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`doit <args> store=<store>` from this repository; exit with its output if it failed."""
    res = subprocess.run([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), *args,
                          f"store={store}"], cwd=REPO, env=doit_env(), capture_output=True,
                         text=True)
    if res.returncode != 0:
        raise SystemExit(f"doit {' '.join(args[:3])} failed:\n{(res.stdout + res.stderr)[-3000:]}")
    return res


def checkout(work: Path, store: Path, recipe: str = "pytorch") -> Path:
    """A git checkout of the recipe's pinned tree at work/pytorch, made once. A recipe whose
    patches apply to checkouts (`patch_checkouts`, pytorch2) gets its tarball as upstream ships
    it (third_party empty, as a clone without submodules): the build applies the overlays and
    patches to a copy. Any other gets the tree as the recipe unpacks it, patched (a build of no
    target unpacks it into the store). PyTorch's .gitignore keeps what a build writes into the
    tree out of its identity."""
    tree = work / "pytorch"
    if (tree / ".git").is_dir():
        return tree
    if tree.exists():
        shutil.rmtree(tree)
    sys.path.insert(0, str(REPO))
    from orchestrator.model.recipe import load_recipe
    from orchestrator.sources.archives import obtain_archive
    from orchestrator.store.artifacts import Store

    spec = load_recipe(REPO / "recipes", recipe).source
    if getattr(spec, "patch_checkouts", False):
        tarball = obtain_archive(spec, Store(store).ensure())
        tree.mkdir(parents=True)
        subprocess.run(["tar", "-xf", str(tarball), "-C", str(tree), "--strip-components=1",
                        "--no-same-owner"], check=True)
    else:
        subprocess.run([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), "build",
                        f"recipe={recipe}", "targets=no_such_target", f"store={store}",
                        "substitute=0"], cwd=REPO, capture_output=True)
        [pinned] = [p for p in (store / "sources").iterdir() if p.name.endswith(f"-{recipe}")]
        shutil.copytree(pinned, tree, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        subprocess.run(["chmod", "-R", "u+w", str(tree)], check=True)
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "pinned tree"]):
        subprocess.run(["git", "-C", str(tree), *cmd], check=True, env=GIT_ENV,
                       capture_output=True)
    return tree


def doit_build(store: Path, tree: Path, jobs: int, *select: str) -> tuple[float, str, Path]:
    """Wall seconds, stderr (the phase lines) and the artifact of `doit build <select>
    source=<tree>`."""
    t0 = time.perf_counter()
    res = doit(store, "build", *select, f"source={tree}", "substitute=0", f"jobs={jobs}",
               "format=json")
    took = time.perf_counter() - t0
    return took, res.stderr, Path(json.loads(res.stdout.strip().splitlines()[-1])["path"])


def phases(stderr: str) -> dict[str, float]:
    """The `✓ <phase> N.Ns` lines of a doit command, summed by name."""
    out: dict[str, float] = {}
    for name, seconds in PHASE.findall(stderr):
        out[name.strip()] = out.get(name.strip(), 0.0) + float(seconds)
    return out


def build_tree(artifact: Path) -> Path:
    """The build tree an artifact was built in: its meta/CMakeCache.txt's CMAKE_CACHEFILE_DIR
    (exact even where another build of the recipe writes to a tree of the same store)."""
    return Path(cache_value(artifact / "meta", "CMAKE_CACHEFILE_DIR"))


def cache_value(directory: Path, key: str) -> str:
    """An entry of `directory`'s CMakeCache.txt (the builder's own reader); exit if none."""
    from orchestrator.builders.pytorch_meta import cache_value as read

    value = read(directory / "CMakeCache.txt", key)
    if value is None:
        raise SystemExit(f"{key} not in {directory / 'CMakeCache.txt'}")
    return value


def developer_env(store: Path, build_dir: Path) -> dict[str, str]:
    """The environment a developer's ninja gets in this tree: the compile lines call the locked
    ccache (its libraries are unpacked debs of the tree's toolchain) with the store's cache."""
    toolchain = Path(cache_value(build_dir, "CMAKE_MAKE_PROGRAM")).parents[2]  # <tc>/venv/bin/ninja
    debs_lib = toolchain / "debs/root/usr/lib/x86_64-linux-gnu"
    return {**os.environ, "CCACHE_DIR": str(store / "ccache"),
            "LD_LIBRARY_PATH": f"{debs_lib}:{os.environ.get('LD_LIBRARY_PATH', '')}"}


def ninja_alone(store: Path, build_dir: Path, jobs: int, targets: list[str]) -> float:
    """Wall seconds of the tree's own ninja (CMAKE_MAKE_PROGRAM) on `targets` (none: all)."""
    ninja = cache_value(build_dir, "CMAKE_MAKE_PROGRAM")
    t0 = time.perf_counter()
    run = subprocess.run([ninja, "-C", str(build_dir), "-j", str(jobs), *targets],
                         capture_output=True, text=True, env=developer_env(store, build_dir))
    if run.returncode:
        raise SystemExit(f"ninja alone failed:\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
    return time.perf_counter() - t0


def appended_steps(log: Path, offset: int) -> list[tuple[list[str], float]]:
    """(outputs, seconds) of each step (edge) in the .ninja_log entries after byte `offset`
    (all of them when ninja recompacted the log meanwhile, i.e. it is now shorter). An edge
    with several outputs is one entry per output with the same start, end and command hash:
    they are one step here."""
    data = log.read_bytes()
    body = data[offset:] if 0 < offset <= len(data) else data.partition(b"\n")[2]
    edges: dict[tuple[str, str, str], list[str]] = {}
    for line in body.decode(errors="replace").splitlines():
        parts = line.split("\t")
        if len(parts) == 5 and not line.startswith("#"):
            edges.setdefault((parts[0], parts[1], parts[4]), []).append(parts[3])
    return [(outputs, (int(end) - int(start)) / 1000) for (start, end, _), outputs in edges.items()]
