"""c10 of the pinned PyTorch 1.13.1 through `doit build`, per variant: cold build (unpack +
configure + compile + verify + commit), the no-op re-run (store hit), and ninja's own no-op
and one-file rebuild in the variant's persistent build tree. Ratios against the cold build.

    .venv/bin/python benchmarks/pytorch_c10_build.py [--variants relwithdebinfo,release] [--jobs 2]

Needs .ci/pytorch-prereqs.sh. Takes a few minutes on 2 cores.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]


def doit(store: Path, *args: str) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("ORCH_STORE", "MAX_JOBS")}
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), *args,
                          f"store={store}", "substitute=0"], cwd=REPO, env=env,
                         capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"doit {' '.join(args)} failed:\n{(res.stdout + res.stderr)[-3000:]}")
    return time.perf_counter() - t0


def ninja(build_dir: Path, jobs: int) -> float:
    t0 = time.perf_counter()
    subprocess.run(["ninja", "-C", str(build_dir), "-j", str(jobs), "c10"], check=True,
                   capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default="relwithdebinfo,release")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    table = Table(title=f"PyTorch 1.13.1 c10 via doit, jobs={args.jobs}")
    for col in ("variant", "step", "seconds", "ratio vs cold"):
        table.add_column(col)
    with tempfile.TemporaryDirectory(prefix="orch-bench-c10-") as tmp:
        store = Path(tmp) / "store"
        doit(store, "toolchain", "recipe=pytorch")  # not measured: shared by every variant
        for variant in args.variants.split(","):
            common = ("build", "recipe=pytorch", f"variant={variant}", "targets=c10", f"jobs={args.jobs}")
            cold = doit(store, *common)
            noop = doit(store, *common)
            [bdir] = [p for p in (store / "build").iterdir() if p.name.startswith(f"pytorch-{variant}-")]
            ninja_noop = ninja(bdir, args.jobs)
            os.utime(bdir / "source/c10/util/Exception.cpp")  # the build's copy of the pinned tree
            one = ninja(bdir, args.jobs)
            for step, t in (("cold build (doit)", cold), ("no-op re-run (doit, store hit)", noop),
                            ("ninja no-op", ninja_noop), ("one .cpp touched (ninja)", one)):
                table.add_row(variant, step, f"{t:.2f}", f"{t / cold:.3f}")
    Console().print(table)


if __name__ == "__main__":
    main()
