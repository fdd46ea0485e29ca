"""Cost of a developer checkout's identity on the real PyTorch 1.13.1 tree (~11k files).

Baseline: hashing every file (what a content-only tree hash does on each run). Compared:
the git-aware identity (HEAD + `git diff HEAD` + untracked files through the stat cache)
cold, on a no-op re-run, and after editing one file. Prints a table of ratios.

    .venv/bin/python benchmarks/pytorch_checkout_identity.py [--tree DIR] [--rounds 3]

Without --tree the tree is unpacked from the pinned tarball (see .ci/pytorch-prereqs.sh).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import median_time  # noqa: E402

from orchestrator.hashing import StatCache, tree_digest  # noqa: E402
from orchestrator.model.recipe import load_recipe  # noqa: E402
from orchestrator.sources.archives import obtain_archive  # noqa: E402
from orchestrator.sources.checkout import checkout_identity  # noqa: E402
from orchestrator.store.artifacts import Store  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}


def make_tree(work: Path) -> Path:
    store = Store(work / "store").ensure()
    recipe = load_recipe(REPO / "recipes", "pytorch")
    tarball = obtain_archive(recipe.source, store)
    tree = work / "pytorch"
    tree.mkdir()
    subprocess.run(["tar", "-xf", str(tarball), "-C", str(tree), "--strip-components=1"], check=True)
    return tree


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="orch-bench-id-") as tmp:
        work = Path(tmp)
        tree = args.tree or make_tree(work)
        if not (tree / ".git").exists():
            for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
                subprocess.run(["git", "-C", str(tree), *cmd], check=True, env=GIT_ENV,
                               capture_output=True)
        nfiles = sum(len(f) for d, _, f in os.walk(tree) if "/.git" not in d + "/")
        for i in range(200):  # untracked generated files, as a build leaves them
            (tree / f"gen_{i}.cpp").write_text(f"int v{i};\n")

        full = median_time(lambda: tree_digest(tree, None, (".git",)), args.rounds)

        def cold() -> None:
            p = work / "stat-cold.json"
            p.unlink(missing_ok=True)
            checkout_identity(tree, StatCache(p))

        cold_t = median_time(cold, args.rounds)
        warm_cache = StatCache(work / "stat-warm.json")
        checkout_identity(tree, warm_cache)
        noop_t = median_time(lambda: checkout_identity(tree, warm_cache), args.rounds)
        target = tree / "c10" / "util" / "Exception.cpp"
        original = target.read_text()
        counter = [0]

        def edit() -> None:
            counter[0] += 1
            target.write_text(original + f"\n// edit {counter[0]}\n")
            checkout_identity(tree, warm_cache)

        edit_t = median_time(edit, args.rounds)
        target.write_text(original)
        shutil.rmtree(work / "store", ignore_errors=True)

    table = Table(title=f"checkout identity, PyTorch 1.13.1 tree ({nfiles} files + 200 untracked), "
                        f"median of {args.rounds}")
    for col in ("method", "seconds", "ratio vs full hash"):
        table.add_column(col)
    for name, t in (("full content hash (baseline)", full), ("git-aware, cold stat cache", cold_t),
                    ("git-aware, no-op re-run", noop_t), ("git-aware, one file edited", edit_t)):
        table.add_row(name, f"{t:.3f}", f"{t / full:.3f}")
    Console().print(table)


if __name__ == "__main__":
    main()
