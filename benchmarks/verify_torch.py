"""Benchmark: `verify` over the locked torch 2.13.0's lib/ closure + _C, against `nm -D
--defined-only` over the same files and `ldd -r` on _C, in one run. Prints a table.

Two verify rows: the first run (an empty verdict cache: every file read and checked) and a
run again over the same files (each file's recorded verdict reused: only dynamic sections
read, see orchestrator/verify/cache.py).

Goal: no slower than nm -D (first run within 1.5x), under 5 s, and peak RSS far below the
400+ MB libtorch_cpu.so (symbol tables are read from an mmap, never the whole file).

    .venv/bin/python benchmarks/verify_torch.py [--torch DIR] [--repeat N]
"""
from __future__ import annotations

import argparse
import os
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

VERIFY_CODE = r"""
import sys, time, json
from pathlib import Path
t0 = time.perf_counter()
from orchestrator.verify.inputs import Interpreter, TorchFacts, VerifyConfig
from orchestrator.verify.engine import verify_tree
torch_dir, cache = Path(sys.argv[1]), Path(sys.argv[2])
roots = [Path(p) for p in sys.argv[3:]]
cfg = VerifyConfig(artifact="torch", root=torch_dir, prefix=torch_dir, roots=roots,
                   interpreter=Interpreter(Path("/usr/bin/python3"), "3.11", ".cpython-311-x86_64-linux-gnu.so", None),
                   toolchain_dirs=[torch_dir], torch=TorchFacts("2.13.0", torch_dir / "lib", True),
                   python_dirs=[torch_dir.parent], cache_dir=cache)
import gc
gc.freeze()  # as doit_glue.action does once a verb's modules are imported
t1 = time.perf_counter()
r = verify_tree(cfg)
t2 = time.perf_counter()
print(json.dumps({"ok": r.ok, "verify_s": t2 - t1, "imports_s": t1 - t0, "reused": len(r.reused),
                  "symbols": None, "failures": [f.cause for f in r.failures()][:3]}))
"""


def find_torch(explicit: str | None) -> Path | None:
    """The torch package of a materialized toolchain (or --torch); None when there is none."""
    if explicit:
        return Path(explicit)
    stores = [Path(os.environ["ORCH_STORE"])] if os.environ.get("ORCH_STORE") else []
    stores.append(REPO / "artifacts")
    for store in stores:
        for d in sorted(store.glob("toolchains/*/venv/lib/python3.*/site-packages/torch")):
            if (d / "lib" / "libtorch_cpu.so").is_file():
                return d
    return None


def measure(cmd: list[str], **kw) -> tuple[float, float, str, float]:
    """(wall seconds, peak RSS MiB, stdout, CPU seconds) of one child process, from wait4's
    rusage (CPU time is what a loaded machine distorts least)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, **kw)
    out = b""
    assert proc.stdout is not None
    while chunk := proc.stdout.read(1 << 20):
        out += chunk if len(out) < (1 << 16) else b""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    return wall, usage.ru_maxrss / 1024, out.decode(errors="replace"), usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--torch", help="torch package directory (default: the locked toolchain's)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    torch_dir = find_torch(args.torch)
    if torch_dir is None:
        sys.exit("no materialized toolchain with torch found; run `doit toolchain` or pass --torch DIR")
    files = sorted(p for p in (torch_dir / "lib").glob("*.so*") if p.is_file() and not p.is_symlink())
    ext = sorted(torch_dir.glob("_C.cpython-*.so"))
    roots = [*files, *ext]
    total_mb = sum(p.stat().st_size for p in roots) / 2**20
    biggest = max(roots, key=lambda p: p.stat().st_size)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    rows: dict[str, list[tuple[float, float, float]]] = {"verify": [], "again": [], "nm": [], "ldd": []}
    inner: list[float] = []
    inner_again: list[float] = []
    imports: list[float] = []
    import json
    cache = Path(tempfile.mkdtemp(prefix="orch-verify-cache-"))
    try:
        for _ in range(args.repeat):
            shutil.rmtree(cache / "entries", ignore_errors=True)  # the first run: nothing recorded
            cmd = [sys.executable, "-c", VERIFY_CODE, str(torch_dir), str(cache / "entries"), *map(str, roots)]
            wall, rss, out, cpu = measure(cmd, env=env)
            info = json.loads(out.strip().splitlines()[-1])
            assert info["reused"] == 0, info
            rows["verify"].append((wall, rss, cpu))
            inner.append(info["verify_s"])
            imports.append(info["imports_s"])
            wall, rss, out, cpu = measure(cmd, env=env)  # again: every verdict recorded
            again = json.loads(out.strip().splitlines()[-1])
            rows["again"].append((wall, rss, cpu))
            inner_again.append(again["verify_s"])
            wall, rss, _, cpu = measure(["nm", "-D", "--defined-only", *map(str, roots)])
            rows["nm"].append((wall, rss, cpu))
            wall, rss, _, cpu = measure(["ldd", "-r", str(ext[0])],
                                        env={**os.environ, "LD_LIBRARY_PATH": str(torch_dir / "lib")})
            rows["ldd"].append((wall, rss, cpu))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    med = {k: (statistics.median(w for w, _, _ in v), max(r for _, r, _ in v),
               statistics.median(c for _, _, c in v)) for k, v in rows.items()}
    nm_s, nm_cpu = med["nm"][0], med["nm"][2]
    t = Table(title=f"verify vs nm -D / ldd -r on torch ({len(roots)} ELF files, {total_mb:.0f} MiB; "
                    f"largest {biggest.name} {biggest.stat().st_size / 2**20:.0f} MiB), median of {args.repeat}")
    t.add_column("what")
    t.add_column("wall s", justify="right")
    t.add_column("x nm -D", justify="right")
    t.add_column("peak RSS MiB", justify="right")
    t.add_column("CPU s", justify="right")
    t.add_column("CPU x nm -D", justify="right")
    t.add_row("orchestrator verify (process: start + imports + all 8 checks)", f"{med['verify'][0]:.3f}",
              f"{med['verify'][0] / nm_s:.2f}", f"{med['verify'][1]:.0f}", f"{med['verify'][2]:.3f}",
              f"{med['verify'][2] / nm_cpu:.2f}")
    t.add_row("  of which verify_tree itself", f"{statistics.median(inner):.3f}",
              f"{statistics.median(inner) / nm_s:.2f}", "")
    t.add_row("  of which importing orchestrator.verify",
              f"{statistics.median(imports):.3f}", "", "")
    t.add_row(f"verify again, same files ({again['reused']} verdicts reused)", f"{med['again'][0]:.3f}",
              f"{med['again'][0] / nm_s:.2f}", f"{med['again'][1]:.0f}", f"{med['again'][2]:.3f}",
              f"{med['again'][2] / nm_cpu:.2f}")
    t.add_row("nm -D --defined-only (same files)", f"{nm_s:.3f}", "1.00", f"{med['nm'][1]:.0f}",
              f"{nm_cpu:.3f}", "1.00")
    t.add_row(f"ldd -r {ext[0].name}", f"{med['ldd'][0]:.3f}", f"{med['ldd'][0] / nm_s:.2f}", f"{med['ldd'][1]:.0f}",
              f"{med['ldd'][2]:.3f}", f"{med['ldd'][2] / nm_cpu:.2f}")
    console = Console()
    console.print(t)
    goal_time = med["verify"][0] < 5.0
    console.print(f"verify ok={info['ok']}; goals: under 5 s: {'yes' if goal_time else 'NO'}; "
                  f"within 1.5x nm -D: {'yes' if med['verify'][0] <= 1.5 * nm_s else 'NO'} (process), "
                  f"no slower than nm -D: {'yes' if med['verify'][0] <= nm_s else 'NO'} (process), "
                  f"{'yes' if statistics.median(inner) <= nm_s else 'NO'} (verify_tree); "
                  f"peak RSS {med['verify'][1]:.0f} MiB vs largest file {biggest.stat().st_size / 2**20:.0f} MiB")
    print(json.dumps({"verify_s": med["verify"][0], "verify_tree_s": statistics.median(inner),
                      "verify_again_s": med["again"][0], "verify_tree_again_s": statistics.median(inner_again),
                      "imports_s": statistics.median(imports), "nm_s": nm_s,
                      "ldd_s": med["ldd"][0], "verify_rss_mib": med["verify"][1], "ok": info["ok"],
                      "verify_cpu_s": med["verify"][2], "verify_again_cpu_s": med["again"][2],
                      "nm_cpu_s": nm_cpu}))


if __name__ == "__main__":
    main()
