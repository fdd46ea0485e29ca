"""Spine benchmarks (issue 2): a printed table of ratios against baselines measured in the
same run. Not a test: these machines are noisy, so nothing here asserts a time.

  1. no-op `doit build` vs `doit list` (doit's own start-up);
  2. `doit switch` of a small artifact vs a ~2 GB one (the ratio must stay near 1);
  (1 and 2 are sampled interleaved with their baselines: a load change hits them alike)
  3. one edited .cpp: `doit build` vs `ninja` alone in the same build dir (overhead), and
     the bytes the commit wrote to the store (only changed files get new copies).

Run: .venv/bin/python benchmarks/spine.py [--big-gb 2] [--repeat 5]
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

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from conftest import DoitResult, copy_project, run_doit  # noqa: E402
from startup import ln_rename, sample  # noqa: E402  (interleaved medians, the ln baseline)

PADDED_CMAKE = """
install(FILES padding.bin DESTINATION share/padded)
"""


def doit(project: Path, *args: str) -> DoitResult:
    res = run_doit(project, *args)
    if res.returncode != 0:
        raise SystemExit(f"doit {' '.join(args)} failed:\n{res.output}")
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--big-gb", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="orch-bench-"))
    store = work / "store"
    s = f"store={store}"
    try:
        small = copy_project(work / "small")
        doit(small, "build", s, "substitute=0")
        doit(small, "build", s, "substitute=0", "variant=release")

        # 1. no-op build vs doit list and python + import doit, sampled interleaved
        t1 = sample({"list": lambda: doit(small, "list"),
                     "python_doit": lambda: subprocess.run(
                         [sys.executable, "-c", "import doit.doit_cmd"], check=True),
                     "noop": lambda: doit(small, "build", s, "substitute=0")}, args.repeat)
        t_list, t_noop = t1["list"], t1["noop"]

        # 2. switch small vs big
        big = copy_project(work / "big")
        demo = big / "recipes/demo"
        with open(demo / "padding.bin", "wb") as f:  # incompressible, so nothing is sparse
            chunk = os.urandom(1 << 20)
            for _ in range(int(args.big_gb * 1024)):
                f.write(chunk)
        cml = demo / "CMakeLists.txt"
        cml.write_text(cml.read_text() + PADDED_CMAKE)
        doit(big, "build", s, "substitute=0")
        doit(big, "build", s, "substitute=0", "variant=release")
        ws_small, ws_big = work / "ws-small", work / "ws-big"
        ws_small.mkdir()
        ws_big.mkdir()

        def flip(project: Path, ws: Path) -> None:
            doit(project, "switch", s, f"workspace={ws}", "variant=release", "substitute=0")
            doit(project, "switch", s, f"workspace={ws}", "variant=relwithdebinfo", "substitute=0")

        t2 = sample({"ln": ln_rename([ws_small, ws_big], work / "profile"),
                     "small": lambda: flip(small, ws_small),
                     "big": lambda: flip(big, ws_big)}, args.repeat)
        t_sw_small, t_sw_big = t2["small"] / 2, t2["big"] / 2
        big_size = sum(f.stat().st_size for f in (ws_big / ".orch/profile").rglob("*") if f.is_file())

        # 3. edit one .cpp: doit build vs ninja alone
        kernel = small / "recipes/demo/ops/add_kernel.cpp"
        # The build tree's key holds the source path and the toolchain: take the one whose
        # source link (.orch-src) points at this checkout's recipe.
        (build_dir,) = [d for d in (store / "build").glob("demo-relwithdebinfo-*")
                        if (d / ".orch-src").resolve() == (small / "recipes/demo").resolve()]
        toolchain = next(p for p in (store / "toolchains").iterdir() if (p / "venv").is_dir())
        ninja = toolchain / "venv/bin/ninja"
        # The compile lines call the locked ccache, whose libraries are unpacked debs.
        debs_lib = toolchain / "debs/root/usr/lib/x86_64-linux-gnu"
        ninja_env = {**os.environ, "CCACHE_DIR": str(store / "ccache"),
                     "LD_LIBRARY_PATH": f"{debs_lib}:{os.environ.get('LD_LIBRARY_PATH', '')}"}
        t_doit, t_ninja, new_bytes, linked_bytes, after = [], [], [], [], []
        for i in range(args.repeat):
            # A new first line shifts every line: the object and the library change.
            kernel.write_text(f"// edit {i}a\n" + kernel.read_text())
            t0 = time.perf_counter()
            res = doit(small, "build", s, "substitute=0")
            t_doit.append(time.perf_counter() - t0)
            m = re.search(r"([\d.]+) MB new, ([\d.]+) MB hard-linked", res.stderr)
            new_bytes.append(float(m[1]))
            linked_bytes.append(float(m[2]))
            # install + verify + commit: what the orchestrator adds after ninja's own work
            after.append(sum(float(t) for t in re.findall(
                r"✓ (?:install|verify|commit)\s+([\d.]+)s", res.stderr)))
            kernel.write_text(f"// edit {i}b\n" + kernel.read_text())
            t0 = time.perf_counter()
            run = subprocess.run([str(ninja), "-C", str(build_dir)], capture_output=True, text=True,
                                 env=ninja_env)
            if run.returncode:
                raise SystemExit(f"ninja alone failed:\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
            t_ninja.append(time.perf_counter() - t0)
        md, mn = statistics.median(t_doit), statistics.median(t_ninja)

        table = Table(title=f"spine benchmarks (median of {args.repeat}; ratios vs baseline in this run)")
        for col in ("measure", "value", "baseline", "ratio"):
            table.add_column(col)
        table.add_row("no-op `doit build` vs `doit list`", f"{t_noop:.3f} s", f"{t_list:.3f} s",
                      f"{t_noop / t_list:.2f}")
        table.add_row(f"`doit switch`: {big_size / 1e9:.1f} GB artifact vs small", f"{t_sw_big:.3f} s",
                      f"{t_sw_small:.3f} s", f"{t_sw_big / t_sw_small:.2f}")
        table.add_row("edit 1 .cpp: `doit build` vs `ninja` alone", f"{md:.2f} s", f"{mn:.2f} s",
                      f"{md / mn:.2f} (+{md - mn:.2f} s)")
        total = statistics.median(new_bytes) + statistics.median(linked_bytes)
        table.add_row("edit 1 .cpp: install + verify + commit phases vs `ninja` alone",
                      f"{statistics.median(after):.2f} s", f"{mn:.2f} s",
                      f"{statistics.median(after) / mn:.2f}")
        table.add_row("edit 1 .cpp: MB newly written by the commit vs artifact MB",
                      f"{statistics.median(new_bytes):.2f} MB", f"{total:.2f} MB",
                      f"{statistics.median(new_bytes) / total:.2f}")
        Console().print(table)
        print(json.dumps({"noop_build_s": t_noop, "list_s": t_list,
                          "python_doit_s": t1["python_doit"], "ln_s": t2["ln"],
                          "switch_small_s": t_sw_small,
                          "switch_big_s": t_sw_big, "edit_doit_s": md, "edit_ninja_s": mn,
                          "commit_new_mb": statistics.median(new_bytes), "artifact_mb": total,
                          "edit_install_verify_commit_s": statistics.median(after)}))
    finally:
        for p in store.rglob("*"):
            if p.is_dir() and not p.is_symlink():
                os.chmod(p, 0o755)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
