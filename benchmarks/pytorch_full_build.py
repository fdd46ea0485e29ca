"""The full PyTorch build: what it cost, and the orchestrator against upstream's own driver
on the same objects.

1. `--report BUILD_LOG [--artifact DIR]`: the numbers of a full `doit build recipe=pytorch`
   run under `/usr/bin/time -v` (wall, CPU, peak RSS), the object count from the artifact's
   meta/ninja_log, and its size.
2. Upstream baseline, measured in this run on a copy of the pinned tree: the tree's own
   `python setup.py build --cmake-only` + `ninja c10` + ninja on a fixed sample of 20
   torch_cpu objects, against `doit build recipe=pytorch targets=c10,<the same 20>` in a
   fresh store with the compile cache off. Ratio orchestrator/upstream (goal <= 1.05).

    .venv/bin/python benchmarks/pytorch_full_build.py --report /tmp/full-build.log \
        --artifact ~/orch-store/store/<id>-pytorch-debug [--variant relwithdebinfo] [--jobs 2]

Needs .ci/pytorch-prereqs.sh. Part 2 compiles c10 and 20 objects twice: ~15 min on 2 cores.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
# A fixed sample of torch_cpu objects across ATen, autograd, JIT and the profiler.
SAMPLE = [f"caffe2/CMakeFiles/torch_cpu.dir/__/{p}.cpp.o" for p in (
    "aten/src/ATen/native/BinaryOps", "aten/src/ATen/native/UnaryOps",
    "aten/src/ATen/native/ReduceOps", "aten/src/ATen/native/TensorFactories",
    "aten/src/ATen/native/Copy", "aten/src/ATen/native/Linear",
    "aten/src/ATen/native/Activation", "aten/src/ATen/native/Normalization",
    "aten/src/ATen/native/TensorShape", "aten/src/ATen/native/TensorAdvancedIndexing",
    "aten/src/ATen/native/mkl/SpectralOps", "aten/src/ATen/core/Tensor",
    "aten/src/ATen/TensorIterator", "aten/src/ATen/Context",
    "torch/csrc/autograd/engine", "torch/csrc/autograd/variable",
    "torch/csrc/jit/ir/ir", "torch/csrc/jit/mobile/flatbuffer_loader",
    "torch/csrc/profiler/kineto_shim", "torch/csrc/jit/serialization/pickler")]
SETUP_ENV = {"USE_CUDA": "0", "USE_DISTRIBUTED": "0", "BUILD_TEST": "0", "USE_SYSTEM_LIBS": "ON",
             **{f"USE_{x}": "0" for x in ("ITT", "MKLDNN", "FBGEMM", "NNPACK", "QNNPACK",
                                          "PYTORCH_QNNPACK", "XNNPACK", "KINETO", "NUMA")}}
BUILD_TYPE_ENV = {"relwithdebinfo": {"REL_WITH_DEB_INFO": "1"}, "debug": {"DEBUG": "1"},
                  "release": {}}


def report(log: Path, artifact: Path | None) -> list[tuple[str, str]]:
    text = log.read_text(errors="replace")
    def field(name: str) -> str:
        m = re.search(rf"^\s*{re.escape(name)}: (.*)$", text, re.M)
        return m[1].strip() if m else "?"
    def number(name: str) -> float | None:
        try:
            return float(field(name))
        except ValueError:
            return None  # no /usr/bin/time -v block: the run was stopped before its end
    user, system = number("User time (seconds)"), number("System time (seconds)")
    rss = number("Maximum resident set size (kbytes)")
    rows = [("this run: wall (elapsed)", field("Elapsed (wall clock) time (h:mm:ss or m:ss)")),
            ("this run: CPU (user + sys)",
             f"{(user + system) / 3600:.2f} h" if user is not None and system is not None else "?"),
            ("this run: peak RSS (one process)", f"{rss / 1e6:.2f} GB" if rss else "?")]
    if artifact is not None:
        steps = (artifact / "meta/ninja_log").read_text().splitlines()[1:]
        objects = [s for s in steps if s.split("\t")[3].endswith(".o")]
        manifest = json.loads((artifact / "manifest.json").read_text())
        rows += [("objects compiled", str(len(objects))),
                 ("artifact files", str(len(manifest["files"]))),
                 ("artifact size", f"{sum(f['size'] for f in manifest['files']) / 1e9:.2f} GB"),
                 ("build_s / verify_s", f"{manifest['timings'].get('build_s')} / "
                                        f"{manifest['timings'].get('verify_s')}")]
    return rows


def tree_rows(build_tree: Path) -> list[tuple[str, str]]:
    """The whole graph from the build tree's cumulative .ninja_log (a build resumed over several
    runs: the artifact's meta/ninja_log holds only the last run's steps). Each output's last
    entry counts; a step's time is its wall time under ninja's -j, so the sum approximates the
    CPU time of the compiles and links (inflated when the machine was shared)."""
    last: dict[str, tuple[str, int]] = {}  # output -> (command hash, ms)
    for line in (build_tree / ".ninja_log").read_text().splitlines()[1:]:
        start, end, _, out, command = line.split("\t")
        last[out] = (command, int(end) - int(start))
    steps = {command: ms for command, ms in last.values()}  # an edge lists each of its outputs
    objects = [ms for out, (_, ms) in last.items() if out.endswith(".o")]
    return [("graph: objects (build tree)", str(len(objects))),
            ("graph: steps (build tree)", str(len(steps))),
            ("graph: summed step time", f"{sum(steps.values()) / 3.6e6:.2f} h"),
            ("graph: summed object compile time", f"{sum(objects) / 3.6e6:.2f} h")]


def run(cmd: list[str], **kw) -> float:
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if res.returncode != 0:
        sys.exit(f"{' '.join(cmd[:4])} failed:\n{(res.stdout + res.stderr)[-3000:]}")
    return time.perf_counter() - t0


def baseline(variant: str, jobs: int) -> list[tuple[str, float, float]]:
    env = {k: v for k, v in os.environ.items() if k not in ("ORCH_STORE", "MAX_JOBS")}
    with tempfile.TemporaryDirectory(prefix="orch-bench-full-") as tmp:
        store = Path(tmp) / "store"
        doit = [sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py")]
        run([*doit, "toolchain", "recipe=pytorch", f"store={store}"], cwd=REPO, env=env)
        targets = ",".join(["c10", *SAMPLE])
        ours = run([*doit, "build", "recipe=pytorch", f"variant={variant}", f"targets={targets}",
                    "compile_cache=off", "substitute=0", f"jobs={jobs}", f"store={store}"],
                   cwd=REPO, env=env)
        [tree] = list((store / "sources").iterdir())
        [tc] = list((store / "toolchains").iterdir())
        up = Path(tmp) / "upstream"
        shutil.copytree(tree, up, symlinks=True)
        upenv = {"PATH": f"{tc / 'venv/bin'}:/usr/bin:/bin", "HOME": env.get("HOME", "/root"),
                 "MAX_JOBS": str(jobs), **SETUP_ENV, **BUILD_TYPE_ENV[variant],
                 "CFLAGS": "-gdwarf-4 -fno-reorder-blocks-and-partition" if variant == "relwithdebinfo"
                 else ("-gdwarf-4" if variant == "debug" else ""),
                 "PYTORCH_BUILD_VERSION": "1.13.1", "PYTORCH_BUILD_NUMBER": "0"}
        t_cfg = run([str(tc / "venv/bin/python"), "setup.py", "build", "--cmake-only"], cwd=up, env=upenv)
        t_c10 = run(["ninja", "-C", str(up / "build"), "-j", str(jobs), "c10", *SAMPLE], env=upenv)
        upstream = t_cfg + t_c10
    return [(f"c10 + {len(SAMPLE)} torch_cpu objects, {variant}", ours, upstream)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", type=Path, help="log of `/usr/bin/time -v doit build recipe=pytorch`")
    ap.add_argument("--artifact", type=Path)
    ap.add_argument("--build-tree", type=Path, help="the build tree: count the whole graph "
                    "from its .ninja_log (a build resumed over several runs)")
    ap.add_argument("--variant", default="relwithdebinfo")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--skip-baseline", action="store_true")
    args = ap.parse_args()
    console = Console()
    if args.report:
        t = Table(title="full build of the pinned PyTorch 1.13.1 (doit build recipe=pytorch)")
        t.add_column("measure")
        t.add_column("value")
        for row in report(args.report, args.artifact):
            t.add_row(*row)
        for row in tree_rows(args.build_tree) if args.build_tree else []:
            t.add_row(*row)
        console.print(t)
    if not args.skip_baseline:
        t = Table(title=f"orchestrator vs upstream setup.py --cmake-only + ninja (jobs={args.jobs})")
        for col in ("same objects", "orchestrator s", "upstream s", "ratio (goal <= 1.05)"):
            t.add_column(col)
        for name, ours, upstream in baseline(args.variant, args.jobs):
            t.add_row(name, f"{ours:.1f}", f"{upstream:.1f}", f"{ours / upstream:.3f}")
        console.print(t)


if __name__ == "__main__":
    main()
