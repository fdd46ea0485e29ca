"""Can the pinned lldb-14 read what a debuggable library's DWARF says? The probe
(lldb_params_probe.py, run by the locked Python with lldb's package) samples functions with
parameters from the library's own sources; a function lldb cannot find, or parameters it
cannot name or locate, fail the debug-info check naming the flags the variant lacks.

Optimized code (-O1 and up) is held to what an optimizer leaves: GCC gives a by-value
aggregate it splits (SRA) or a parameter it drops no location at the function's entry, in any
flags. So there a parameter unlocated at entry fails the library only when most sampled
functions have one (what wrong flags or DWARF lldb-14 cannot read do to every function);
fewer are reported, not failed (`optimized_out`)."""
from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.toolchain.debugger_env import locate

SAMPLE = 4                # functions per library
PROBE_TIMEOUT_S = 600
PROBE = Path(__file__).with_name("lldb_params_probe.py")
# What GCC 12 must be told for lldb-14 (docs/contracts.md "Debug-path mapping").
LLDB14_FLAGS = ("-gdwarf-4", "-fno-reorder-blocks-and-partition")


@dataclass(frozen=True)
class Unreadable:
    """A sampled function lldb-14 cannot read: its name, where, and what is missing."""
    function: str
    where: str
    missing: str


class StartedProbe:
    """The probe running in the background on `libs` (stdout and stderr in temporary files,
    so nothing blocks on a full pipe); `result()` waits for its JSON."""

    def __init__(self, python: Path, env: dict[str, str], libs: list[Path], sample: int) -> None:
        self.libs = libs
        self._out, self._err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        self._proc = subprocess.Popen([str(python), str(PROBE), str(sample), *map(str, libs)],
                                      env=env, stdout=self._out, stderr=self._err)

    def result(self, timeout: float = PROBE_TIMEOUT_S) -> dict[str, dict[str, Any]]:
        """Keyed by the paths given; raises TimeoutExpired (the probe is then stopped) or
        RuntimeError (it failed)."""
        try:
            code = self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.close()
            raise
        self._out.seek(0)
        self._err.seek(0)
        out, err = self._out.read().decode(errors="replace"), self._err.read().decode(errors="replace")
        self.close()
        if code != 0:
            last = (err.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"the lldb-14 probe failed (exit {code}): {last}")
        result: dict[str, dict[str, Any]] = json.loads(out)
        return result

    def close(self) -> None:
        """Stop the probe if it still runs; drop its files."""
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._out.close()
        self._err.close()


def start_probe(deb_root: Path, python: Path, libs: list[Path], sample: int = SAMPLE) -> StartedProbe | None:
    """The probe on `libs`, started now (None without an lldb or libraries)."""
    tools = locate(deb_root)
    if tools is None or not libs:
        return None
    return StartedProbe(python, tools.python_env(), libs, sample)


def probe(deb_root: Path, python: Path, libs: list[Path], sample: int = SAMPLE) -> dict[str, dict[str, Any]]:
    """The probe's JSON for each library (keyed by the path given), or {} without an lldb."""
    started = start_probe(deb_root, python, libs, sample)
    return {} if started is None else started.result()


def optimized_out(result: dict[str, Any]) -> list[Unreadable]:
    """The sampled functions with a named parameter lldb-14 finds no location for at entry."""
    out = []
    for f in result.get("functions", []):
        unlocated = [p for p in f["parameters"] if p not in f["located"]]
        if f["function"] and unlocated:
            out.append(Unreadable(f["name"], f"{f['file']}:{f['line']}",
                                  "no value location at entry for " + ", ".join(unlocated)))
    return out


def unreadable(result: dict[str, Any], optimized: bool = False) -> Unreadable | None:
    """The first sampled function lldb-14 does not read, or None when it reads them. The
    probe passes over functions whose parameters are all unnamed in the source (nothing to
    read); the library fails if lldb names no parameter of any function it sampled. With
    `optimized`, parameters unlocated at entry fail only in most of the functions sampled."""
    if "error" in result:
        return Unreadable("(the library)", "", result["error"])
    functions = result.get("functions", [])
    for f in functions:
        if not f["function"]:
            return Unreadable(f["name"], f"{f['file']}:{f['line']}", "no function at its "
                              "address (no block, no variables)")
    partial = optimized_out(result)
    with_names = sum(1 for f in functions if f["parameters"])
    if partial and (not optimized or 2 * len(partial) > with_names):
        return partial[0]
    if functions and not any(f["parameters"] for f in functions):
        f = functions[0]
        return Unreadable(f["name"], f"{f['file']}:{f['line']}", "no parameter names")
    return None


def flags_to_add(producers: list[str]) -> list[str]:
    """The lldb-14 flags the DW_AT_producer strings lack (all of them when none is known)."""
    if not producers:
        return list(LLDB14_FLAGS)
    out = []
    if any(not any(t in ("-gdwarf-4", "-gdwarf-3", "-gdwarf-2") for t in p.split())
           for p in producers):
        out.append("-gdwarf-4")
    if any("-fno-reorder-blocks-and-partition" not in p.split() for p in producers):
        out.append("-fno-reorder-blocks-and-partition")
    return out
