"""lldb commands of the orchestrator, loaded by the generated .lldbinit (`command script
import`): `py-bt` (the native backtrace with each CPython 3.11 frame, file:line:function,
under the _PyEval_EvalFrameDefault call that runs it) and the PyTorch type summaries
(torch_types). Reads memory only: works on core files and GCC builds."""
from __future__ import annotations

import os
import sys

import lldb  # type: ignore[import-not-found]

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpython_frames  # noqa: E402
from lldb_memory import memory_reader  # noqa: E402


def _runtime_address(target: lldb.SBTarget) -> int:
    for ctx in target.FindSymbols("_PyRuntime"):
        sym = ctx.GetSymbol()
        if sym.IsValid():
            addr = sym.GetStartAddress().GetLoadAddress(target)
            if addr != lldb.LLDB_INVALID_ADDRESS:
                return addr
    return 0


def python_frames(thread: lldb.SBThread) -> list:
    """The thread's Python frames (innermost first); [] when none."""
    process = thread.GetProcess()
    target = process.GetTarget()
    runtime = _runtime_address(target)
    if not runtime:
        return []
    read = memory_reader(process, cpython_frames.Invalid)
    return cpython_frames.python_frames(read, runtime, thread.GetThreadID())


def _native_line(frame: lldb.SBFrame) -> str:
    name = frame.GetFunctionName() or frame.GetSymbol().GetName() or "??"
    module = frame.GetModule().GetFileSpec().GetFilename() or "?"
    line = f"  frame #{frame.GetFrameID()}: 0x{frame.GetPC():x} {module}`{name}"
    entry = frame.GetLineEntry()
    if entry.IsValid() and entry.GetFileSpec().GetFilename():
        line += f" at {entry.GetFileSpec().GetFilename()}:{entry.GetLine()}"
    return line


def py_bt(debugger, command, result, internal_dict):  # noqa: ARG001 (lldb's signature)
    """py-bt: the selected thread's backtrace with its CPython 3.11 frames."""
    thread = debugger.GetSelectedTarget().GetProcess().GetSelectedThread()
    if not thread.IsValid():
        result.SetError("py-bt: no process (run or attach first, or load a core file)")
        return
    try:
        frames = python_frames(thread)
    except cpython_frames.Invalid as e:
        result.AppendMessage(f"py-bt: <invalid> Python frames ({e})")
        frames = []
    native = [_native_line(thread.GetFrameAtIndex(i)) for i in range(thread.GetNumFrames())]
    only_python = command.strip() == "-p"
    lines = ([f"  Python {f}" for f in frames] if only_python
             else cpython_frames.interleave(native, frames))
    if not frames:
        lines.append("  (no CPython 3.11 frames: the process runs no Python on this thread, "
                     "or its interpreter is not the locked CPython 3.11)")
    result.AppendMessage(f"* thread #{thread.GetIndexID()}, Python frames: {len(frames)}")
    for ln in lines:
        result.AppendMessage(ln)


def __lldb_init_module(debugger, internal_dict):  # noqa: N807 (lldb's hook)
    debugger.HandleCommand(f"command script add -o -f {__name__}.py_bt py-bt")
    # Imported by lldb (not by Python) so that `type summary add -F` finds its functions.
    here = os.path.dirname(os.path.abspath(__file__))
    debugger.HandleCommand(f'command script import "{here}/torch_types_lldb.py"')
