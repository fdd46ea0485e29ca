"""The debugged process's memory as lldb reads it, for the scripts lldb loads (py-bt in
lldb_orch, the type summaries in torch_types_lldb): one reader, raising each caller's own
`Invalid` on a short or failed read."""
from __future__ import annotations

from collections.abc import Callable

import lldb  # type: ignore[import-not-found]


def memory_reader(process: lldb.SBProcess,
                  invalid: type[Exception]) -> Callable[[int, int], bytes]:
    def read(addr: int, size: int) -> bytes:
        if size == 0:
            return b""
        err = lldb.SBError()
        data = process.ReadMemory(addr, size, err)
        if not err.Success() or data is None or len(data) != size:
            raise invalid(f"cannot read {size} bytes at 0x{addr:x}")
        return bytes(data)
    return read
