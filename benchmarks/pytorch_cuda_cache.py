"""Benchmark: the compile cache on PyTorch 2.6.0's CUDA objects (issue 32, items 3 and 4).

recipe=pytorch2-cuda (the locked CUDA 12.4 toolkit, TORCH_CUDA_ARCH_LIST=9.0), variant
relwithdebinfo, targets= c10, c10_cuda and a fixed sample of ATen's CUDA objects: an upsampling
kernel (UpSampleNearest2d.cu), an elementwise one (BinaryMulKernel.cu), a reduction
(ReduceSumProdKernel.cu) and a cuBLAS caller (CUDABlas.cpp, host code). Two builds in one
store, through the real CLI:

  pinned          the recipe's pinned tree (compiled from its copy in the build tree)
  second checkout the same tree unpacked at another path, `source=PATH` (a developer's
                  checkout: another build tree, the same compile cache)

For each, ccache's counters of that build (its build tree's stats log), split into the CUDA
compiles (nvcc: .cu) and the rest (c10, c10_cuda's C++ and CUDABlas.cpp), and the wall time
of the command. Goal (issue 32): the second checkout's CUDA objects >= 95 % hits (PyTorch's
own CI reports 21-28 % on its CUDA and PTX steps). The first build's counters depend on what
the store's cache already held (run with a fresh --store for a cold one).

    .venv/bin/python benchmarks/pytorch_cuda_cache.py [--store DIR] [--keep]

Needs the set-up (.ci/pytorch-prereqs.sh) and the CUDA debs (bootstrap.sh). Configure is about
a minute per build tree on 2 idle cores, the sample's CUDA objects 1-5 minutes each.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.builders.compile_cache.stats import STATS_LOG, BuildStats  # noqa: E402
from orchestrator.model.recipe import load_recipe  # noqa: E402
from orchestrator.sources.archives import obtain_archive  # noqa: E402
from orchestrator.store.artifacts import Store  # noqa: E402

ATEN = "caffe2/CMakeFiles/torch_cuda.dir/__/aten/src/ATen"
SAMPLE = (f"{ATEN}/native/cuda/UpSampleNearest2d.cu.o", f"{ATEN}/native/cuda/BinaryMulKernel.cu.o",
          f"{ATEN}/native/cuda/ReduceSumProdKernel.cu.o", f"{ATEN}/cuda/CUDABlas.cpp.o")
TARGETS = ",".join(("c10", "c10_cuda", *SAMPLE))  # c10_cuda links libc10: both installed


def split_stats(log: Path) -> dict[str, BuildStats]:
    """The build's ccache counters by kind of compile: "cuda" (a .cu input) and "c++"."""
    counts: dict[str, Counter[str]] = {"cuda": Counter(), "c++": Counter()}
    kind = "c++"
    for line in log.read_text(errors="replace").splitlines() if log.is_file() else []:
        line = line.strip()
        if line.startswith("#"):
            kind = "cuda" if line.endswith(".cu") else "c++"
        elif line:
            counts[kind][line] += 1
    return {k: BuildStats(dict(c)) for k, c in counts.items()}


def build(store: Path, *extra: str) -> tuple[dict[str, object], float]:
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), "build",
                          "format=json", "recipe=pytorch2-cuda", "variant=relwithdebinfo",
                          f"targets={TARGETS}", "substitute=0", f"store={store}", *extra],
                         cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"build failed (exit {res.returncode}):\n{(res.stdout + res.stderr)[-4000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1]), wall


def newest_tree(store: Path) -> Path:
    trees = sorted((store / "build").glob("pytorch2-cuda-relwithdebinfo-*"),
                   key=lambda p: (p / STATS_LOG).stat().st_mtime if (p / STATS_LOG).is_file() else 0)
    return trees[-1]


def row(name: str, stats: dict[str, BuildStats], wall: float) -> str:
    cu, cxx = stats["cuda"], stats["c++"]
    return (f"{name:<16} {cu.hits:>8} {cu.misses:>10} {cu.hit_rate:>9.1%}   "
            f"{cxx.hits:>8} {cxx.misses:>10} {cxx.hit_rate:>9.1%}   {wall:>7.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", type=Path, help="the store (default: a fresh one in a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (store, checkout)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pytorch-cuda-cache-"))
    store = args.store or tmp / "store"
    s = Store(store).ensure()
    recipe = load_recipe(REPO / "recipes", "pytorch2-cuda")
    for archive in (recipe.source, *recipe.source.overlays):
        obtain_archive(archive, s)
    tarball = obtain_archive(recipe.source, s)
    checkout = tmp / "checkout"
    checkout.mkdir()
    subprocess.run(["tar", "-xf", str(tarball), "-C", str(checkout), "--strip-components=1",
                    "--no-same-owner"], check=True)
    try:
        print(f"targets={TARGETS}\nstore={store}\n")
        print(f"{'build':<16} {'cuda hit':>8} {'cuda miss':>10} {'cuda rate':>9}   "
              f"{'c++ hit':>8} {'c++ miss':>10} {'c++ rate':>9}   {'wall s':>7}")
        pinned, wall = build(store)
        print(row("pinned", split_stats(newest_tree(store) / STATS_LOG), wall), flush=True)
        second, wall = build(store, f"source={checkout}")
        stats = split_stats(newest_tree(store) / STATS_LOG)
        print(row("second checkout", stats, wall), flush=True)
        cu = stats["cuda"]
        print(f"\nsecond checkout, CUDA objects: {cu.hits} hit(s), {cu.misses} miss(es), "
              f"{cu.hit_rate:.1%} (goal >= 95 %)")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
