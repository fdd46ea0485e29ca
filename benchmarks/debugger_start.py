"""Benchmark: time from starting lldb-vscode-14 to the first stop, with the generated launch
configuration as it is (lldb's symbol preloading off) against the same configuration with
preloading on (lldb-14's default), in the same run, rounds interleaved (issue 30 item 5).
Not a test: nothing here asserts a time.

    .venv/bin/python benchmarks/debugger_start.py --workspace WS --script FILE.py
        (--line SOURCE:LINE | --function NAME) [--rounds 3] [--config NAME]

WS is a workspace with an artifact switched in and `doit vscode` run (its .vscode/launch.json).
At each stop lldb's own `statistics dump` (stopCommands) says how long it spent indexing
DWARF and in which libraries: the table prints the median seconds to the stop, the median
index seconds, and the libraries indexed. The first round of each is the cold one (the page
cache aside); the others are warm.

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

from orchestrator.ide.debugger_init import PRELOAD_OFF  # noqa: E402
from orchestrator.ide.variables import resolve_variables  # noqa: E402

CONFIG = "orch: Python + C++ (lldb-14)"
PRELOAD_ON = PRELOAD_OFF.replace("false", "true")
TIMEOUT_S = 900.0


def config_for(ws: Path, name: str, script: Path, preload: bool) -> dict[str, Any]:
    configs = json.loads((ws / ".vscode/launch.json").read_text())["configurations"]
    [config] = [c for c in configs if c["name"] == name]
    config = resolve_variables(config, ws, script)
    if PRELOAD_OFF not in config.get("initCommands", []):
        raise SystemExit(f"{ws}/.vscode/launch.json: {name!r} has no {PRELOAD_OFF!r}: "
                         "run `doit vscode` in the workspace again")
    if preload:
        config["initCommands"] = [PRELOAD_ON if c == PRELOAD_OFF else c
                                  for c in config["initCommands"]]
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


def one(args: argparse.Namespace, preload: bool) -> tuple[float, dict[str, float]]:
    config = config_for(args.workspace, args.config, args.script, preload)
    if args.line:
        source, line = args.line.rsplit(":", 1)
        path = Path(source) if Path(source).is_absolute() else args.workspace / source
        stop = stop_at_line([config["debugAdapterExecutable"]], config, path, int(line),
                            timeout=TIMEOUT_S)
    else:
        stop = stop_in_function(config, args.function, timeout=TIMEOUT_S)
    if stop.reason != "breakpoint":
        raise SystemExit(f"did not stop at the breakpoint: {stop.reason} {stop.frames[:1]}")
    return stop.seconds, indexed(stop)


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
    runs: dict[bool, list[tuple[float, dict[str, float]]]] = {False: [], True: []}
    for n in range(args.rounds):
        for preload in ((False, True) if n % 2 == 0 else (True, False)):
            runs[preload].append(one(args, preload))
    what = f"line {args.line}" if args.line else f"function {args.function}"
    print(f"lldb-vscode-14 start → stop at {what}, {args.rounds} rounds, interleaved")
    print(f"{'':<34}{'cold s':>9}{'median s':>10}{'index s':>10}  libraries indexed")
    for preload, label in ((False, "preload off (generated)"), (True, "preload on (lldb default)")):
        secs = [s for s, _ in runs[preload]]
        idx = [sum(i.values()) for _, i in runs[preload]]
        libs = sorted({lib for _, i in runs[preload] for lib in i})
        print(f"{label:<34}{secs[0]:>9.2f}{statistics.median(secs):>10.2f}"
              f"{statistics.median(idx):>10.2f}  {', '.join(libs) or 'none'}")
    off = statistics.median(s for s, _ in runs[False])
    on = statistics.median(s for s, _ in runs[True])
    print(f"ratio on / off (median): {on / off:.2f}")
    print(json.dumps({"off_s": off, "on_s": on, "ratio": on / off,
                      "off_index_s": statistics.median(sum(i.values()) for _, i in runs[False]),
                      "on_index_s": statistics.median(sum(i.values()) for _, i in runs[True])}))


if __name__ == "__main__":
    main()
