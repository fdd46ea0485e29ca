"""Edit one .cpp of c10 in a git checkout of the pinned PyTorch 1.13.1 tree → `doit build`,
against ninja alone rebuilding the same kind of edit in the same build tree (issue 12's
"edit one .cpp → build ≤ ninja alone + 0.3 s", c10 row). Not a test: nothing here asserts a
time.

Each round adds a new function to c10/util/Exception.cpp (a compile the compile cache has
never seen, then libc10.so's link), times `doit build recipe=pytorch targets=c10
source=<checkout>`, then does the same edit again and times ninja alone (`ninja -C <tree>
c10` with the compile cache's directory). The phase lines of the last doit build are printed.

    .venv/bin/python benchmarks/pytorch_c10_edit.py [--work DIR] [--rounds 5] [--jobs 2]

--work keeps the checkout and the store between runs (the first run builds c10: a few
minutes on 2 cores; later runs start from that tree). Needs .ci/pytorch-prereqs.sh.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EDITED = "c10/util/Exception.cpp"
PHASE = re.compile(r"✓ ([a-z][\w ]*?)\s+([\d.]+)s")


GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}


def checkout(work: Path, store: Path) -> Path:
    """A git checkout of the pinned tree (its tarball, components and patches as the recipe
    unpacks them: a build of no target unpacks it into the store) at work/pytorch, made once.
    PyTorch's .gitignore keeps what a build writes into the tree out of its identity."""
    tree = work / "pytorch"
    if not (tree / ".git").is_dir():
        if tree.exists():
            shutil.rmtree(tree)
        subprocess.run([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), "build",
                        "recipe=pytorch", "targets=no_such_target", f"store={store}",
                        "substitute=0"], cwd=REPO, capture_output=True)
        [pinned] = [p for p in (store / "sources").iterdir() if p.name.endswith("-pytorch")]
        shutil.copytree(pinned, tree, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        subprocess.run(["chmod", "-R", "u+w", str(tree)], check=True)
        for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "pinned tree"]):
            subprocess.run(["git", "-C", str(tree), *cmd], check=True, env=GIT_ENV,
                           capture_output=True)
    return tree


def doit_build(store: Path, tree: Path, jobs: int) -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ORCH_STORE", "MAX_JOBS")}
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), "build",
                          "recipe=pytorch", "targets=c10", f"source={tree}", f"store={store}",
                          "substitute=0", f"jobs={jobs}"], cwd=REPO, env=env,
                         capture_output=True, text=True)
    took = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"doit build failed:\n{(res.stdout + res.stderr)[-3000:]}")
    return took, res.stderr


def build_tree(store: Path, tree: Path) -> Path:
    """The variant's build tree of this checkout (its .orch-src links the checkout)."""
    [d] = [d for d in (store / "build").glob("pytorch-relwithdebinfo-*")
           if (d / ".orch-src").resolve() == tree.resolve()]
    return d


def ninja_alone(store: Path, tree: Path, jobs: int) -> float:
    """The tree's ninja as a developer would run it: the compile lines call the locked ccache
    (its libraries are unpacked debs) with the store's cache directory."""
    toolchain = next(p for p in (store / "toolchains").iterdir() if (p / "venv").is_dir())
    debs_lib = toolchain / "debs/root/usr/lib/x86_64-linux-gnu"
    env = {**os.environ, "CCACHE_DIR": str(store / "ccache"),
           "LD_LIBRARY_PATH": f"{debs_lib}:{os.environ.get('LD_LIBRARY_PATH', '')}"}
    t0 = time.perf_counter()
    run = subprocess.run([str(toolchain / "venv/bin/ninja"), "-C", str(build_tree(store, tree)),
                          "-j", str(jobs), "c10"], capture_output=True, text=True, env=env)
    if run.returncode:
        raise SystemExit(f"ninja alone failed:\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
    return time.perf_counter() - t0


def edit(tree: Path, token: str) -> None:
    """A new function: the object and libc10.so change, and no compile cache has seen it."""
    src = tree / EDITED
    src.write_text(src.read_text() + f"\nnamespace c10 {{ int orch_bench_{token}() {{ return 1; }} }}\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, help="kept between runs (default: a temp dir)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="orch-bench-c10-edit-"))
    work.mkdir(parents=True, exist_ok=True)
    store = work / "store"
    try:
        tree = checkout(work, store)
        subprocess.run(["git", "-C", str(tree), "checkout", "-q", "--", EDITED], check=True)
        first, _ = doit_build(store, tree, args.jobs)  # cold, or the checkout as committed
        print(f"first build (not a sample): {first:.1f} s", file=sys.stderr)
        t_doit, t_ninja, phases = [], [], ""
        stamp = f"{os.getpid()}_{time.time_ns()}"
        for i in range(args.rounds):
            edit(tree, f"{stamp}_{i}a")
            took, phases = doit_build(store, tree, args.jobs)
            t_doit.append(took)
            edit(tree, f"{stamp}_{i}b")
            t_ninja.append(ninja_alone(store, tree, args.jobs))
            print(f"  round {i}: doit build {took:.2f} s, ninja alone {t_ninja[-1]:.2f} s",
                  file=sys.stderr, flush=True)
        subprocess.run(["git", "-C", str(tree), "checkout", "-q", "--", EDITED], check=True)
        md, mn = statistics.median(t_doit), statistics.median(t_ninja)
        after = {name: float(s) for name, s in PHASE.findall(phases)}
        print("phases of the last doit build:\n" + "\n".join(
            line for line in phases.splitlines() if "✓" in line or "head start" in line),
            file=sys.stderr)
        print(f"edit 1 .cpp of c10: doit build {md:.2f} s, ninja alone {mn:.2f} s "
              f"(+{md - mn:.2f} s, median of {args.rounds})")
        print(json.dumps({"edit_doit_s": md, "edit_ninja_s": mn, "rounds": args.rounds,
                          "last_phases_s": after}))
    finally:
        if args.work is None:
            subprocess.run(["chmod", "-R", "u+w", str(work)], check=False)
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
