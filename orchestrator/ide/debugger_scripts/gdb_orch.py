"""gdb commands of the orchestrator, sourced by the generated .gdbinit: `orch-py-bt` (and
`py-bt` when the interpreter's own python-gdb.py has not defined it) shows each CPython 3.11
frame, file:line:function, under the _PyEval_EvalFrameDefault call that runs it; and the
PyTorch pretty printers (torch_types_gdb). Reads memory only: works on core files."""
from __future__ import annotations

import os
import sys

import gdb  # type: ignore[import-not-found]

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpython_frames  # noqa: E402


def _read(addr: int, size: int) -> bytes:
    if size == 0:
        return b""
    try:
        return gdb.selected_inferior().read_memory(addr, size).tobytes()
    except gdb.MemoryError as e:
        raise cpython_frames.Invalid(f"cannot read {size} bytes at 0x{addr:x}") from e


def _runtime_address() -> int:
    try:
        return int(gdb.parse_and_eval("(unsigned long)&_PyRuntime"))
    except gdb.error:
        return 0


def _native_line(level: int, frame: gdb.Frame) -> str:
    name = frame.name() or "??"
    sal = frame.find_sal()
    where = f" at {sal.symtab.filename}:{sal.line}" if sal.symtab is not None else ""
    return f"#{level} 0x{frame.pc():x} in {name}{where}"


class PyBt(gdb.Command):
    """The selected thread's backtrace with its CPython 3.11 frames (file:line:function).
    Usage: orch-py-bt [-p]   (-p: the Python frames only)"""

    def __init__(self, name: str) -> None:
        super().__init__(name, gdb.COMMAND_STACK)

    def invoke(self, arg: str, from_tty: bool) -> None:  # noqa: ARG002 (gdb's signature)
        thread = gdb.selected_thread()
        if thread is None:
            raise gdb.GdbError("py-bt: no process (run or attach first, or load a core file)")
        runtime = _runtime_address()
        frames = []
        if runtime:
            try:
                frames = cpython_frames.python_frames(_read, runtime, thread.ptid[1])
            except cpython_frames.Invalid as e:
                gdb.write(f"py-bt: <invalid> Python frames ({e})\n")
        native, frame, level = [], gdb.newest_frame(), 0
        while frame is not None and level < cpython_frames.MAX_FRAMES:
            native.append(_native_line(level, frame))
            frame, level = frame.older(), level + 1
        lines = ([f"  Python {f}" for f in frames] if arg.strip() == "-p"
                 else cpython_frames.interleave(native, frames))
        gdb.write(f"Python frames: {len(frames)}\n" + "".join(ln + "\n" for ln in lines))
        if not frames:
            gdb.write("  (no CPython 3.11 frames on this thread)\n")


def skip_plt_locations(breakpoint: gdb.Breakpoint) -> None:
    """A breakpoint on a function that a library also calls through its own PLT (every
    default-visibility function of a -fPIC library, PyTorch's included) gets a location on the
    `@plt` stub too, and an attached gdb stops there first, with no source. Disable the stub
    locations when the function itself has one (lldb never stops in stubs)."""
    locations = getattr(breakpoint, "locations", None) or []  # gdb >= 13
    stubs = [loc for loc in locations if (loc.function or "").endswith("@plt")]
    if stubs and len(stubs) < len(locations):
        for loc in stubs:
            if loc.enabled:
                loc.enabled = False  # fires breakpoint_modified again: then nothing to do


gdb.events.breakpoint_created.connect(skip_plt_locations)
gdb.events.breakpoint_modified.connect(skip_plt_locations)
PyBt("orch-py-bt")
try:
    gdb.execute("help py-bt", to_string=True)
except gdb.error:  # the interpreter's python-gdb.py is not loaded: ours under its name
    PyBt("py-bt")
try:
    import torch_types_gdb
    torch_types_gdb.register()
except ImportError:
    pass
