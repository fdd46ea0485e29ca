"""One PyTorch CPU op timed in this process, for `doit bench ... metric=us_per_op`: conv2d,
matmul or an elementwise add on fixed shapes, in one thread (two builds compared at the same
parallelism), with torch.utils.benchmark's Timer.blocked_autorange. The last line printed is
one JSON object: {"op", "us_per_op" (the median), "iqr_us", "runs", "threads", "torch"}.

    python docs/examples/torch_ops_bench.py conv2d|matmul|add [--threads 1] [--min-time 0.5]

The comparison of a PyTorch tree's RelWithDebInfo and Release artifacts (docs/bench.md):

    doit bench recipe=pytorch2 variants=relwithdebinfo,release metric=us_per_op \\
        -- python docs/examples/torch_ops_bench.py conv2d
"""
from __future__ import annotations

import argparse
import json
from collections.abc import Callable

import torch
import torch.utils.benchmark as benchmark

# op -> (statement, its inputs): small enough for many runs per round on one core
OPS: dict[str, tuple[str, Callable[[], dict[str, torch.Tensor]]]] = {
    "conv2d": ("torch.nn.functional.conv2d(x, w, padding=1)",
               lambda: {"x": torch.randn(1, 16, 32, 32), "w": torch.randn(32, 16, 3, 3)}),
    "matmul": ("torch.matmul(a, b)",
               lambda: {"a": torch.randn(256, 256), "b": torch.randn(256, 256)}),
    "add": ("torch.add(a, b, alpha=2.0)",
            lambda: {"a": torch.randn(1 << 18), "b": torch.randn(1 << 18)}),
}


def measure(op: str, threads: int, min_time: float) -> dict[str, object]:
    torch.manual_seed(0)
    stmt, inputs = OPS[op]
    timer = benchmark.Timer(stmt=stmt, globals={"torch": torch, **inputs()},
                            num_threads=threads, label=op)
    m = timer.blocked_autorange(min_run_time=min_time)
    return {"op": op, "us_per_op": m.median * 1e6, "iqr_us": m.iqr * 1e6,
            "runs": len(m.times), "threads": threads, "torch": torch.__version__}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("op", choices=sorted(OPS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--min-time", type=float, default=0.5,
                    help="seconds of runs at least (blocked_autorange's min_run_time)")
    args = ap.parse_args()
    print(json.dumps(measure(args.op, args.threads, args.min_time)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
