"""Benchmark: time from starting lldb-vscode-14 to the first stop and to the stopped frame's
variables (the Locals pane), with the generated launch configuration as it is against the same
configuration with one of its lldb settings back at lldb-14's default, in the same run,
rounds interleaved (issue 30 item 5). Not a test: nothing here asserts a time.

    .venv/bin/python benchmarks/debugger_start.py --workspace WS --script FILE.py
        (--line SOURCE:LINE | --function NAME) [--rounds 3] [--config NAME]

The configurations: "generated" (symbol preloading off, line breakpoints bound exactly:
target.move-to-nearest-code false), "preload on" (lldb indexes every library as it loads)
and "nearest code" (lldb moves a line breakpoint to the nearest code, checking each match
against its function's declaration). WS is a workspace with an artifact switched in and `doit
vscode` run (its .vscode/launch.json). At each stop lldb's own `statistics dump`
(stopCommands) says how long it spent indexing DWARF and in which libraries, before the
stopped event. The table prints per configuration the first (cold: the page cache aside)
and the median seconds to the stop, the median seconds to the Locals, the median index
seconds at the stop and the libraries indexed.

The whole 2.6 tree (RelWithDebInfo switched into WS, a script calling torch.sub):
    --line <checkout>/aten/src/ATen/native/BinaryOps.cpp:<a line in sub_out's body>
    --function at::native::structured_sub_out::impl
On the demo (this repository's workspace after bootstrap):
    --workspace . --script s.py --line recipes/demo/ops/add_kernel.cpp:<line>
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from dap_client import Stop, stop_at_line, stop_in_function  # noqa: E402

from orchestrator.ide.debugger_init import EXACT_LINES, PRELOAD_OFF  # noqa: E402
from orchestrator.ide.variables import resolve_variables  # noqa: E402

CONFIG = "orch: Python + C++ (lldb-14)"
PRELOAD_ON = PRELOAD_OFF.replace("false", "true")
NEAREST = EXACT_LINES.replace("false", "true")
# label -> (generated setting, what replaces it)
VARIANTS: dict[str, tuple[str, str] | None] = {
    "generated": None,
    "preload on (lldb default)": (PRELOAD_OFF, PRELOAD_ON),
    "nearest code (lldb default)": (EXACT_LINES, NEAREST),
}
TIMEOUT_S = 900.0


def config_for(ws: Path, name: str, script: Path, variant: str) -> dict[str, Any]:
    configs = json.loads((ws / ".vscode/launch.json").read_text())["configurations"]
    [config] = [c for c in configs if c["name"] == name]
    config = resolve_variables(config, ws, script)
    for setting in (PRELOAD_OFF, EXACT_LINES):
        if setting not in config.get("initCommands", []):
            raise SystemExit(f"{ws}/.vscode/launch.json: {name!r} has no {setting!r}: "
                             "run `doit vscode` in the workspace again")
    if (swap := VARIANTS[variant]) is not None:
        config["initCommands"] = [swap[1] if c == swap[0] else c for c in config["initCommands"]]
    config["stopCommands"] = ["statistics dump"]
    return config


def indexed(stop: Stop) -> dict[str, float]:
    """Library -> seconds lldb spent indexing its DWARF, from the dump at the stop."""
    text = stop.output[stop.output.rfind("statistics dump"):]
    try:
        stats = json.loads(text[text.index("{"):text.rindex("}") + 1])
    except ValueError:
        return {}
    return {Path(m["path"]).name: m["debugInfoIndexTime"] for m in stats.get("modules", [])
            if m.get("debugInfoIndexTime")}


Run = tuple[float, float, dict[str, float]]  # to the stop, to the Locals, index s per library


def one(args: argparse.Namespace, variant: str) -> Run:
    config = config_for(args.workspace, args.config, args.script, variant)
    if args.line:
        source, line = args.line.rsplit(":", 1)
        path = Path(source) if Path(source).is_absolute() else args.workspace / source
        stop = stop_at_line([config["debugAdapterExecutable"]], config, path, int(line),
                            timeout=TIMEOUT_S)
    else:
        stop = stop_in_function(config, args.function, timeout=TIMEOUT_S)
    if stop.reason != "breakpoint":
        raise SystemExit(f"did not stop at the breakpoint: {stop.reason} {stop.frames[:1]}")
    return stop.seconds, stop.locals_seconds, indexed(stop)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--script", type=Path, required=True)
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--line", help="SOURCE:LINE (relative to the workspace, or absolute)")
    where.add_argument("--function")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--config", default=CONFIG)
    args = ap.parse_args()
    args.workspace, args.script = args.workspace.resolve(), args.script.resolve()
    runs: dict[str, list[Run]] = {v: [] for v in VARIANTS}
    for n in range(args.rounds):
        order = list(VARIANTS) if n % 2 == 0 else list(reversed(VARIANTS))
        for variant in order:
            runs[variant].append(one(args, variant))
    what = f"line {args.line}" if args.line else f"function {args.function}"
    print(f"lldb-vscode-14 start → stop at {what}, {args.rounds} rounds, interleaved")
    print(f"{'':<30}{'cold s':>8}{'stop s':>8}{'Locals s':>10}{'index s':>9}  libraries indexed")
    out: dict[str, dict[str, float]] = {}
    for variant, rs in runs.items():
        med = {"stop_s": statistics.median(r[0] for r in rs),
               "locals_s": statistics.median(r[1] for r in rs),
               "index_s": statistics.median(sum(r[2].values()) for r in rs)}
        libs = sorted({lib for r in rs for lib in r[2]})
        print(f"{variant:<30}{rs[0][0]:>8.2f}{med['stop_s']:>8.2f}{med['locals_s']:>10.2f}"
              f"{med['index_s']:>9.2f}  {', '.join(libs) or 'none'}")
        out[variant] = med
    base = out["generated"]["stop_s"]
    for variant in list(VARIANTS)[1:]:
        print(f"ratio {variant} / generated, to the stop (median): {out[variant]['stop_s'] / base:.2f}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
