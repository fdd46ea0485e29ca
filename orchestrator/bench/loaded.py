"""Which artifacts' libraries a command's processes load: one run of the command (its first
warm-up run, or one run more when warmup=0; never a kept sample) under the dynamic loader's
own trace (LD_DEBUG=libs, one file per process under LD_DEBUG_OUTPUT), whose `calling init:`
lines name every shared object each process initialised, those it dlopen()s (a Python
extension, ctypes) included. Of these, the ones inside a store entry are the side's
`libraries`; one inside any entry but the side's own means the process mixed two artifacts
(the LD_LIBRARY_PATH trap of issue 31): a failed check, never a sample."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from orchestrator.bench.rounds import Measure, Run, run_once
from orchestrator.errors import CheckFailed

INIT = "calling init: "


def traced_libraries(command: list[str], run: Run, measure: Measure) -> set[str]:
    """Run command once under the loader's trace; the real paths of every shared object any
    of its processes initialised."""
    with tempfile.TemporaryDirectory(prefix="orch-bench-ld-") as trace_dir:
        env = {**run.env, "LD_DEBUG": "libs", "LD_DEBUG_OUTPUT": str(Path(trace_dir) / "ld")}
        run_once(command, Run(run.label, env), measure)
        found: set[str] = set()
        for trace in Path(trace_dir).iterdir():
            for line in trace.read_text(errors="replace").splitlines():
                _, sep, path = line.partition(INIT)
                if sep and path.strip():
                    found.add(os.path.realpath(path.strip()))
    return found


def entry_of(library: str, entries_dir: Path) -> str | None:
    """The store entry (its directory name) a library lies in, or None."""
    head = f"{entries_dir}/"
    return library[len(head):].split("/", 1)[0] if library.startswith(head) else None


def store_libraries(command: list[str], run: Run, measure: Measure, own: Path) -> list[str]:
    """The libraries from store entries that command's processes loaded in run's environment,
    sorted; CheckFailed when one comes from an entry other than `own` (its store path)."""
    real_own = Path(os.path.realpath(own))
    entries_dir = real_own.parent
    loaded = sorted(lib for lib in traced_libraries(command, run, measure)
                    if entry_of(lib, entries_dir) is not None)
    mixed = [lib for lib in loaded if entry_of(lib, entries_dir) != real_own.name]
    if mixed:
        raise CheckFailed(f"bench: the command in {run.label} loaded another artifact's library "
                          f"({mixed[0]}), so one process mixed two artifacts; run it with "
                          "`doit run` to see its environment, and check its RUNPATH "
                          "(readelf -d) and LD_LIBRARY_PATH", report="\n".join(mixed))
    return loaded
