"""The Python frames of a stopped CPython 3.11 thread, read from the process's memory only
(no code run in it, no DWARF of the interpreter needed: Debian's /usr/bin/python3.11 is
stripped and its debug symbols are not in the archive for every update). Shared by the
lldb and gdb commands; the debugger gives `read(address, size) -> bytes`.

Offsets: CPython 3.11's own headers on x86_64 (Include/internal/pycore_frame.h,
pycore_runtime.h, pycore_interp.h, cpython/pystate.h, cpython/code.h); tests compile them
with offsetof against the locked interpreter's headers (tests/test_debug_python_frames.py).
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

Read = Callable[[int, int], bytes]

OFFSETS = {
    "runtime.interpreters_head": 40,   # _PyRuntimeState.interpreters.head
    "interp.next": 0,                  # PyInterpreterState.next
    "interp.threads_head": 16,         # PyInterpreterState.threads.head
    "tstate.next": 8,                  # PyThreadState.next
    "tstate.cframe": 56,               # PyThreadState.cframe (_PyCFrame *)
    "tstate.native_thread_id": 160,    # PyThreadState.native_thread_id
    "cframe.current_frame": 8,         # _PyCFrame.current_frame (_PyInterpreterFrame *)
    "frame.f_code": 32,                # _PyInterpreterFrame.f_code
    "frame.previous": 48,
    "frame.prev_instr": 56,
    "frame.is_entry": 68,
    "code.co_firstlineno": 72,
    "code.co_filename": 112,
    "code.co_qualname": 128,
    "code.co_linetable": 136,
    "code.co_code_adaptive": 184,
    "str.length": 16,                  # PyASCIIObject.length
    "str.state": 32,
    "bytes.size": 16,                  # PyVarObject.ob_size
    "bytes.data": 32,                  # PyBytesObject.ob_sval
}
ASCII_DATA, COMPACT_DATA = 48, 72      # sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject)
MAX_FRAMES = 4096
MAX_TEXT = 4096


class Invalid(Exception):
    """Memory that does not hold what a CPython 3.11 structure should (freed, corrupt)."""


@dataclass(frozen=True)
class PyFrame:
    file: str
    line: int
    function: str
    is_entry: bool          # the first frame a _PyEval_EvalFrameDefault call runs

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.function}"


def _ptr(read: Read, addr: int) -> int:
    if not addr:
        raise Invalid("null pointer")
    return struct.unpack("<Q", read(addr, 8))[0]


def _field(read: Read, base: int, name: str, fmt: str = "<Q") -> int:
    return struct.unpack(fmt, read(base + OFFSETS[name], struct.calcsize(fmt)))[0]


def read_str(read: Read, obj: int) -> str:
    """A str object's text (compact ASCII, latin-1, UCS-2 or UCS-4)."""
    length = _field(read, obj, "str.length", "<q")
    state = _field(read, obj, "str.state", "<I")
    kind, compact, ascii_ = (state >> 2) & 7, (state >> 5) & 1, (state >> 6) & 1
    if not compact or kind not in (1, 2, 4) or not 0 <= length <= MAX_TEXT:
        raise Invalid(f"not a compact str at 0x{obj:x}")
    data = read(obj + (ASCII_DATA if ascii_ else COMPACT_DATA), length * kind)
    codec = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind]
    return data.decode(codec)


def _varint(data: bytes, i: int) -> tuple[int, int]:
    b = data[i]
    i += 1
    val, shift = b & 63, 0
    while b & 64:
        b = data[i]
        i += 1
        shift += 6
        val |= (b & 63) << shift
    return val, i


def line_of(linetable: bytes, firstlineno: int, lasti: int) -> int:
    """PyCode_Addr2Line for 3.11's location table (Objects/locations.md), lasti in code units."""
    line, addr, i = firstlineno, 0, 0
    if lasti < 0:
        return firstlineno
    while i < len(linetable):
        first = linetable[i]
        i += 1
        code, end = (first >> 3) & 15, addr + (first & 7) + 1
        this: int | None = line
        if code == 15:
            this = None
        elif code == 14:
            delta, i = _varint(linetable, i)
            line += -(delta >> 1) if delta & 1 else delta >> 1
            this = line
            for _ in range(3):
                _, i = _varint(linetable, i)
        elif code == 13:
            delta, i = _varint(linetable, i)
            line += -(delta >> 1) if delta & 1 else delta >> 1
            this = line
        elif code in (10, 11, 12):
            line += code - 10
            this = line
            i += 2
        else:
            i += 1
        if addr <= lasti < end:
            return this if this is not None else -1
        addr = end
    return firstlineno


def thread_state(read: Read, runtime: int, native_tid: int) -> int:
    """The PyThreadState of the OS thread `native_tid` (0: none runs Python there)."""
    interp = _field(read, runtime, "runtime.interpreters_head")
    seen = 0
    while interp:
        tstate = _field(read, interp, "interp.threads_head")
        seen += 1
        while tstate:
            seen += 1
            if seen > MAX_FRAMES:
                raise Invalid("the interpreter/thread lists do not end")
            if _field(read, tstate, "tstate.native_thread_id") == native_tid:
                return tstate
            tstate = _field(read, tstate, "tstate.next")
        interp = _field(read, interp, "interp.next")
    return 0


def python_frames(read: Read, runtime: int, native_tid: int) -> list[PyFrame]:
    """Innermost first; [] when the thread runs no Python. Raises Invalid on bad memory."""
    try:
        return _walk(read, runtime, native_tid)
    except (struct.error, UnicodeDecodeError, IndexError, ValueError, OverflowError) as e:
        raise Invalid(f"{type(e).__name__}: {e}") from e


def _walk(read: Read, runtime: int, native_tid: int) -> list[PyFrame]:
    tstate = thread_state(read, runtime, native_tid)
    if not tstate:
        return []
    cframe = _field(read, tstate, "tstate.cframe")
    frame = _field(read, cframe, "cframe.current_frame") if cframe else 0
    out: list[PyFrame] = []
    while frame and len(out) < MAX_FRAMES:
        code = _field(read, frame, "frame.f_code")
        if not code:
            raise Invalid(f"frame 0x{frame:x} has no code object")
        prev_instr = _field(read, frame, "frame.prev_instr")
        first = _field(read, code, "code.co_firstlineno", "<i")
        table_obj = _field(read, code, "code.co_linetable")
        size = _field(read, table_obj, "bytes.size", "<q")
        if not 0 <= size <= 1 << 20:
            raise Invalid(f"code 0x{code:x}: no line table")
        table = read(table_obj + OFFSETS["bytes.data"], size)
        lasti = (prev_instr - (code + OFFSETS["code.co_code_adaptive"])) // 2
        out.append(PyFrame(read_str(read, _field(read, code, "code.co_filename")),
                           line_of(table, first, lasti),
                           read_str(read, _field(read, code, "code.co_qualname")),
                           bool(read(frame + OFFSETS["frame.is_entry"], 1)[0])))
        frame = _field(read, frame, "frame.previous")
    return out


def by_eval_call(frames: list[PyFrame]) -> list[list[PyFrame]]:
    """The frames grouped per _PyEval_EvalFrameDefault call, innermost call first (a group
    ends at its entry frame)."""
    groups: list[list[PyFrame]] = [[]]
    for f in frames:
        groups[-1].append(f)
        if f.is_entry:
            groups.append([])
    return [g for g in groups if g]


EVAL_FUNCTION = "_PyEval_EvalFrameDefault"


def interleave(native: list[str], frames: list[PyFrame]) -> list[str]:
    """Native frame lines (already formatted, innermost first) with each
    _PyEval_EvalFrameDefault followed by the Python frames it runs."""
    groups = by_eval_call(frames)
    out: list[str] = []
    for line in native:
        out.append(line)
        if EVAL_FUNCTION in line and groups:
            out += [f"    Python {f}" for f in groups.pop(0)]
    for g in groups:
        out += [f"    Python {f}" for f in g]
    return out
