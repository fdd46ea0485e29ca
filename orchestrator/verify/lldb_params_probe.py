"""Run by the system Python 3.11 with the pinned lldb-14's Python package on PYTHONPATH (not
imported by the orchestrator): for each library given, sample functions whose signature has
parameters and whose code comes from the artifact's own sources (/orch/src, /orch/build), and report
what lldb-14 reads of them statically: the function, its parameters' names and whether each
has a value location at the function's entry. Symbols are not preloaded and each library is
loaded alone (not with the libraries it needs), so lookups are by address and stay within it;
only a parameter of a class its unit declares (GCC describes a class with virtual methods in
full only where its vtable is) makes lldb index that library's DWARF to find the class. A
function whose parameters lldb lists but the source leaves all unnamed (`void f(int)`) has
no names to read and is passed over (counted as "unnamed"); one whose parameters lldb does
not list at all is kept: that is a reading failure. Nothing is run; one JSON object on stdout.

    python3 lldb_params_probe.py SAMPLE LIB...
"""
from __future__ import annotations

import json
import re
import sys
from typing import Any

import lldb  # type: ignore[import-not-found]

# Where the artifact's own sources are named (-ffile-prefix-map; /orch/toolchains/: headers).
OWN_ROOTS = ("/orch/src/", "/orch/build/")
LOCATION = re.compile(r'Variable: .*?name = "([^"]+)".*?location = ([^,]+(?:, [^=]+?)?), decl')


def has_parameters(name: str) -> bool:
    """A demangled C++ name with a non-empty parameter list: `f(int)`, not `f()` / `f(void)`."""
    if not name.endswith(")") or "(" not in name:
        return False
    depth, i = 0, len(name) - 1
    while i >= 0:  # the outermost (...) at the end
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0:
            break
        i -= 1
    params = name[i + 1:-1].strip()
    return params not in ("", "void")


def evenly(items: list[str], count: int) -> list[str]:
    if len(items) <= count:
        return items
    step = len(items) / count
    return [items[int(k * step)] for k in range(count)]


def probe_library(debugger: Any, path: str, sample: int) -> dict[str, Any]:
    # The library alone: with its dependents (lldb's default) a type lookup in a small
    # library searches and indexes them too (libtorch_cpu.so's 3.3 GB of DWARF for each).
    target = debugger.CreateTarget(path, None, None, False, lldb.SBError())
    if not target.IsValid() or target.GetNumModules() == 0:
        return {"error": f"lldb-14 cannot load {path}"}
    module = target.GetModuleAtIndex(0)
    starts: dict[str, int] = {}
    for s in module:
        name = s.GetName()
        if s.GetType() == lldb.eSymbolTypeCode and name and has_parameters(name) \
                and not name.endswith("(.cold)"):
            starts.setdefault(name, s.GetStartAddress().GetFileAddress())
    names = sorted(starts)
    out: list[dict[str, Any]] = []
    looked = unnamed = 0
    for name in evenly(names, sample * 8):
        if len(out) >= sample:
            break
        addr = target.ResolveFileAddress(starts[name])
        ctx = target.ResolveSymbolContextForAddress(addr, lldb.eSymbolContextEverything)
        line = ctx.GetLineEntry()
        file = line.GetFileSpec().fullpath if line.IsValid() else None
        if not file or not file.startswith(OWN_ROOTS):
            continue  # not the artifact's own code (a header's inline, a static library)
        looked += 1
        func = ctx.GetFunction()
        entry = {"name": name, "file": file, "line": line.GetLine(), "function": func.IsValid(),
                 "parameters": [], "located": []}
        if func.IsValid():
            args = func.GetBlock().GetVariables(target, True, False, False)
            entry["parameters"] = [args.GetValueAtIndex(i).GetName()
                                   for i in range(args.GetSize())
                                   if args.GetValueAtIndex(i).GetName()]
            if args.GetSize() and not entry["parameters"]:
                unnamed += 1  # all its parameters unnamed in the source: no names to read
                continue
            ret = lldb.SBCommandReturnObject()
            debugger.GetCommandInterpreter().HandleCommand(
                f"image lookup -v -a 0x{starts[name]:x}", ret)
            entry["located"] = [m.group(1) for m in LOCATION.finditer(ret.GetOutput() or "")
                                if m.group(1) in entry["parameters"]]
        out.append(entry)
    indexed = index_seconds(debugger)
    mine = module.GetFileSpec().fullpath
    modules = [target.GetModuleAtIndex(i).GetFileSpec().fullpath
               for i in range(target.GetNumModules())]
    debugger.DeleteTarget(target)
    return {"functions": out, "candidates": len(names), "own": looked, "unnamed": unnamed,
            "index_seconds": -1.0 if indexed is None else indexed.get(mine, 0.0),
            "modules": modules}


def index_seconds(debugger: Any) -> dict[str, float] | None:
    """Per module path (every module the debugger holds), the seconds lldb spent indexing its
    DWARF as a whole (its own statistics): 0 while every lookup stays within the compile units
    it lands in. None: the statistics did not parse (the probe then reports -1)."""
    ret = lldb.SBCommandReturnObject()
    debugger.GetCommandInterpreter().HandleCommand("statistics dump", ret)
    text = ret.GetOutput() or ""
    try:
        stats = json.loads(text[text.index("{"):])
    except ValueError:
        return None
    return {m.get("path", ""): float(m.get("debugInfoIndexTime", 0.0))
            for m in stats.get("modules", [])}


def main(argv: list[str]) -> int:
    sample = int(argv[1])
    lldb.SBDebugger.Initialize()
    debugger = lldb.SBDebugger.Create(False)
    debugger.SetAsync(False)
    # lldb indexes a library's whole DWARF when its target is made (preload): on the 2.6
    # tree's libtorch_cpu.so that was most of verify's minute and 8 GB. Address lookups,
    # all this probe does, read only the compile unit they land in.
    debugger.GetCommandInterpreter().HandleCommand("settings set target.preload-symbols false",
                                                   lldb.SBCommandReturnObject())
    result = {path: probe_library(debugger, path, sample) for path in argv[2:]}
    json.dump(result, sys.stdout)
    lldb.SBDebugger.Destroy(debugger)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
