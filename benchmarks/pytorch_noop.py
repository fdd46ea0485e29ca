"""No-op `doit build` on the whole PyTorch tree (issue 12), against ninja's own no-op of the
same build tree and against the same command with the plan memo off (ORCH_PLAN_MEMO=0, the
full planner), sampled interleaved in one run. Not a test: nothing asserts a time.

Needs an artifact already built (a full build takes hours; never here):
  --store DIR      a store holding `recipe=pytorch` built from the pinned source
                   [--store-targets c10] (a pinned source's identity is its lock's hashes,
                   the same whatever the targets: the no-op reads the same files; the
                   baseline is then `ninja -n <targets>` in that tree)
  --checkout DIR   also (or alone): a git checkout of the tree, built with source=DIR
                   [--targets c10] into --checkout-store DIR (the identity covers the whole
                   tree's 11k files whatever the targets). Without --store, its baseline is
                   `ninja -n <targets>` in the checkout's own build tree.

    .venv/bin/python benchmarks/pytorch_noop.py --store ~/orch-store \
        [--checkout ~/ckout --checkout-store ~/ckout-store --targets c10] [--rounds 7]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from startup import checked, sample  # noqa: E402  (interleaved medians)


def doit_build(project: Path, args: list[str], memo: bool) -> Callable[[], object]:
    env = {k: v for k, v in os.environ.items() if k not in ("ORCH_STORE", "MAX_JOBS")}
    if not memo:
        env["ORCH_PLAN_MEMO"] = "0"
    argv = [sys.executable, "-m", "doit", "-f", str(project / "dodo.py"), "build", *args]
    return lambda: checked(argv, cwd=project, env=env)


def present(project: Path, args: list[str]) -> dict:
    """The no-op build's JSON line; exits when the artifact is not in the store (no build)."""
    env = {k: v for k, v in os.environ.items() if k not in ("ORCH_STORE", "MAX_JOBS")}
    res = subprocess.run([sys.executable, "-m", "doit", "-f", str(project / "dodo.py"), "plan",
                          *args, "format=json"], cwd=project, env=env, capture_output=True,
                         text=True)
    if res.returncode != 0:
        raise SystemExit(f"doit plan {' '.join(args)} failed: {res.stderr.strip()[-300:]}")
    plan = json.loads(res.stdout.strip().splitlines()[-1])
    if plan.get("action") != "present":
        raise SystemExit(f"{' '.join(args)}: artifact {plan.get('id')} is not in the store; "
                         "build it first (this benchmark never builds)")
    return plan


def ninja_noop(store: Path, recipe_variant: str, targets: list[str] | None = None,
               checkout: Path | None = None) -> Callable[[], object]:
    """`ninja -n [targets]` in the newest build tree of recipe-variant in store (its own
    no-op): the pinned source's tree (its copy `source/` inside), or the checkout's (its
    `source` links it)."""
    def built_from(tree: Path) -> Path | None:
        link = tree / "source"
        return link.resolve() if link.is_symlink() else None

    want = None if checkout is None else checkout.resolve()
    trees = sorted((t for t in (store / "build").glob(f"{recipe_variant}-*")
                    if built_from(t) == want), key=lambda p: p.stat().st_mtime)
    ninjas = sorted(store.glob("toolchains/*/venv/bin/ninja"))
    if not trees or not ninjas:
        raise SystemExit(f"{store}: no build tree {recipe_variant}-* or no toolchain ninja")
    return lambda: checked([str(ninjas[0]), "-C", str(trees[-1]), "-n", *(targets or [])])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path)
    ap.add_argument("--project", type=Path, default=REPO, help="the project (dodo.py) to run")
    ap.add_argument("--variant", default="relwithdebinfo")
    ap.add_argument("--checkout", type=Path)
    ap.add_argument("--checkout-store", type=Path)
    ap.add_argument("--targets", default="")
    ap.add_argument("--store-targets", default="", help="targets= of the pinned build")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    if args.store is None and args.checkout is None:
        ap.error("give --store, --checkout, or both")
    py = sys.executable
    cmds: dict[str, Callable[[], object]] = {
        "python + import doit": lambda: checked([py, "-c", "import doit.doit_cmd"])}
    if args.store is not None:
        pinned = ["recipe=pytorch", f"variant={args.variant}", f"store={args.store.expanduser()}",
                  *([f"targets={args.store_targets}"] if args.store_targets else [])]
        present(args.project, pinned)
        cmds.update({
            "ninja -n (pinned tree)": ninja_noop(
                args.store.expanduser(), f"pytorch-{args.variant}",
                args.store_targets.split(",") if args.store_targets else []),
            "no-op doit build, pinned": doit_build(args.project, pinned, memo=True),
            "no-op doit build, pinned, memo off": doit_build(args.project, pinned, memo=False),
        })
    if args.checkout:
        cstore = (args.checkout_store or args.store).expanduser()
        ck = ["recipe=pytorch", f"variant={args.variant}", f"store={cstore}",
              f"source={args.checkout.expanduser().absolute()}",
              *([f"targets={args.targets}"] if args.targets else [])]
        present(args.project, ck)
        if args.store is None:
            cmds["ninja -n (pinned tree)"] = ninja_noop(cstore, f"pytorch-{args.variant}",
                                                        args.targets.split(",") if args.targets else [],
                                                        checkout=args.checkout.expanduser())
        files = checked(["git", "-C", str(args.checkout), "ls-files"]).count("\n")
        cmds[f"git status (checkout, {files} files)"] = lambda: checked(
            ["git", "-C", str(args.checkout), "status", "--porcelain=v2", "-z",
             "--untracked-files=all"])
        cmds["no-op doit build, checkout"] = doit_build(args.project, ck, memo=True)
        cmds["no-op doit build, checkout, memo off"] = doit_build(args.project, ck, memo=False)
    for fn in cmds.values():
        fn()  # warm: the first command after a change writes the memo
    t = sample(cmds, args.rounds)
    table = Table(title=f"no-op build on the PyTorch tree (median of {args.rounds}, interleaved; "
                        f"load {os.getloadavg()[0]:.1f})")
    for col in ("measure", "value", "baseline", "ratio", "goal"):
        table.add_column(col)

    def row(name: str, base: str, goal: str = "") -> None:
        table.add_row(name, f"{t[name]:.3f} s", f"{t[base]:.3f} s ({base})",
                      f"{t[name] / t[base]:.2f}", goal)

    if args.store is not None:
        row("no-op doit build, pinned", "ninja -n (pinned tree)", "<= 0.3 s")
        row("no-op doit build, pinned", "no-op doit build, pinned, memo off")
        row("no-op doit build, pinned", "python + import doit")
    if args.checkout:
        git_row = next(k for k in t if k.startswith("git status"))
        row("no-op doit build, checkout", "ninja -n (pinned tree)", "<= 0.3 s")
        row("no-op doit build, checkout", "no-op doit build, checkout, memo off")
        row("no-op doit build, checkout", git_row)
    Console(width=150).print(table)
    print(json.dumps(t))


if __name__ == "__main__":
    main()
