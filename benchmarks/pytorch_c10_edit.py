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
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pytorch_checkout import build_tree, checkout, doit_build, ninja_alone, phases  # noqa: E402

EDITED = "c10/util/Exception.cpp"
C10 = ("recipe=pytorch", "targets=c10")


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
        first, _, artifact = doit_build(store, tree, args.jobs, *C10)  # cold, or as committed
        print(f"first build (not a sample): {first:.1f} s", file=sys.stderr)
        t_doit, t_ninja, err = [], [], ""
        stamp = f"{os.getpid()}_{time.time_ns()}"
        for i in range(args.rounds):
            edit(tree, f"{stamp}_{i}a")
            took, err, artifact = doit_build(store, tree, args.jobs, *C10)
            t_doit.append(took)
            edit(tree, f"{stamp}_{i}b")
            t_ninja.append(ninja_alone(store, build_tree(artifact), args.jobs, ["c10"]))
            print(f"  round {i}: doit build {took:.2f} s, ninja alone {t_ninja[-1]:.2f} s",
                  file=sys.stderr, flush=True)
        subprocess.run(["git", "-C", str(tree), "checkout", "-q", "--", EDITED], check=True)
        md, mn = statistics.median(t_doit), statistics.median(t_ninja)
        after = phases(err)
        print("phases of the last doit build:\n" + "\n".join(
            line for line in err.splitlines() if "✓" in line or "head start" in line),
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
