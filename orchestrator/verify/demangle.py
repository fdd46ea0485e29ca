"""C++ demangling with the system libstdc++'s own `__cxa_demangle` (through ctypes, loaded on
the first name to demangle: a clean verify of C code never needs it)."""
from __future__ import annotations

import functools
from typing import Any


@functools.lru_cache(maxsize=1)
def _abi() -> tuple[Any, Any, Any]:
    """(ctypes, __cxa_demangle, free), bound once."""
    import ctypes

    # By soname, as the dynamic loader finds them (ctypes.util.find_library would run
    # `ldconfig -p` once for each: two forks of this process per verify).
    lib = ctypes.CDLL("libstdc++.so.6")
    libc = ctypes.CDLL("libc.so.6")
    fn = lib.__cxa_demangle
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    libc.free.argtypes = [ctypes.c_void_p]
    return ctypes, fn, libc.free


@functools.lru_cache(maxsize=65536)
def demangle(name: bytes | str) -> str:
    """The readable form of a mangled C++ symbol; anything else comes back unchanged."""
    raw = name.encode() if isinstance(name, str) else name
    text = raw.decode(errors="replace")
    if not raw.startswith(b"_Z"):
        return text
    ctypes, cxa_demangle, free = _abi()
    status = ctypes.c_int(0)
    ptr = cxa_demangle(raw, None, None, ctypes.byref(status))
    if status.value != 0 or not ptr:
        return text
    try:
        return str(ctypes.string_at(ptr).decode(errors="replace"))
    finally:
        free(ptr)
