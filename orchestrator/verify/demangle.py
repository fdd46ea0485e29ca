"""C++ demangling with the system libstdc++'s own `__cxa_demangle` (through ctypes)."""
from __future__ import annotations

import ctypes
import ctypes.util
import functools

_lib = ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6")
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
_demangle = _lib.__cxa_demangle
_demangle.restype = ctypes.c_void_p
_demangle.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
_libc.free.argtypes = [ctypes.c_void_p]


@functools.lru_cache(maxsize=65536)
def demangle(name: bytes | str) -> str:
    """The readable form of a mangled C++ symbol; anything else comes back unchanged."""
    raw = name.encode() if isinstance(name, str) else name
    text = raw.decode(errors="replace")
    if not raw.startswith(b"_Z"):
        return text
    status = ctypes.c_int(0)
    ptr = _demangle(raw, None, None, ctypes.byref(status))
    if status.value != 0 or not ptr:
        return text
    try:
        return ctypes.string_at(ptr).decode(errors="replace")
    finally:
        _libc.free(ptr)
