"""gdb pretty printers for PyTorch's C++ types (torch_types reads the memory; nothing runs in
the process). Registered by gdb_orch as `orch-torch`."""
from __future__ import annotations

import re

import gdb  # type: ignore[import-not-found]
import torch_types as tt


def _read(addr: int, size: int) -> bytes:
    if size == 0:
        return b""
    try:
        return gdb.selected_inferior().read_memory(addr, size).tobytes()
    except (gdb.MemoryError, gdb.error, OverflowError) as e:
        raise tt.Invalid(f"cannot read 0x{addr:x}") from e


def _member(val: gdb.Value, *path: str) -> gdb.Value | None:
    try:
        for name in path:
            val = val[name]
        return val
    except gdb.error:
        return None


def _first_word(val: gdb.Value) -> int:
    if val.address is None:
        raise tt.Invalid("not in memory")
    return int.from_bytes(_read(int(val.address), 8), "little")


class _Printer:
    def __init__(self, val: gdb.Value) -> None:
        self.val = val

    def to_string(self) -> str:
        try:
            return self.text()
        except (tt.Invalid, gdb.error, gdb.MemoryError, ValueError, OverflowError):
            return tt.INVALID

    def text(self) -> str:
        raise NotImplementedError


class Tensor(_Printer):
    def text(self) -> str:
        target = _member(self.val, "impl_", "target_")
        impl = int(target) if target is not None else _first_word(self.val)
        return tt.tensor_impl_text(_read, impl)


class TensorImpl(_Printer):
    def text(self) -> str:
        if self.val.address is None:
            raise tt.Invalid("not in memory")
        return tt.tensor_impl_text(_read, int(self.val.address))


class IntrusivePtr(_Printer):
    def text(self) -> str:
        target = _member(self.val, "target_")
        ptr = int(target) if target is not None else _first_word(self.val)
        if "TensorImpl" in str(self.val.type.strip_typedefs()):
            return tt.tensor_impl_text(_read, ptr)
        return f"0x{ptr:x}" if ptr else "null"


class IntArray(_Printer):
    def text(self) -> str:
        data = _member(self.val, "Data") or _member(self.val, "Data_")
        length = _member(self.val, "Length")
        if data is None or length is None:
            raise tt.Invalid("no members")
        return tt.int_array_text(_read, int(data), int(length))


class SmallVector(_Printer):
    def text(self) -> str:
        begin, size = _member(self.val, "BeginX"), _member(self.val, "Size")
        if begin is None or size is None:
            raise tt.Invalid("no members")
        element = self.val.type.strip_typedefs().template_argument(0)
        if element.sizeof == 8 and element.code == gdb.TYPE_CODE_INT:
            return tt.int_array_text(_read, int(begin), int(size))
        return f"size={int(size)}"


class Scalar(_Printer):
    def text(self) -> str:
        if self.val.address is None:
            raise tt.Invalid("not in memory")
        return tt.scalar_text(_read, int(self.val.address))


class ScalarType(_Printer):
    def text(self) -> str:
        return tt.scalar_type_text(int(self.val))


class Device(_Printer):
    def text(self) -> str:
        kind, index = _member(self.val, "type_"), _member(self.val, "index_")
        if kind is not None and index is not None:
            return tt.device_text(int(kind), int(index))
        raw = _read(int(self.val.address), 2)
        return tt.device_text(int.from_bytes(raw[:1], "little", signed=True),
                              int.from_bytes(raw[1:], "little", signed=True))


PRINTERS = [
    (re.compile(r"^at::(Tensor|TensorBase)$"), Tensor),
    (re.compile(r"^c10::TensorImpl$"), TensorImpl),
    (re.compile(r"^c10::intrusive_ptr<.+>$"), IntrusivePtr),
    (re.compile(r"^c10::(ArrayRef|HeaderOnlyArrayRef)<long>$"), IntArray),
    (re.compile(r"^c10::SmallVector<.+>$"), SmallVector),
    (re.compile(r"^c10::Scalar$"), Scalar),
    (re.compile(r"^c10::ScalarType$"), ScalarType),
    (re.compile(r"^c10::Device$"), Device),
]


def lookup(val: gdb.Value):
    try:
        kind = val.type.strip_typedefs()
        if kind.code == gdb.TYPE_CODE_REF:
            val = val.referenced_value()
            kind = val.type.strip_typedefs()
        name = kind.unqualified().tag or kind.unqualified().name
    except gdb.error:
        return None
    if not name:
        return None
    for regex, printer in PRINTERS:
        if regex.match(name):
            return printer(val)
    return None


lookup.name = "orch-torch"  # type: ignore[attr-defined]


def register() -> None:
    gdb.pretty_printers[:] = [p for p in gdb.pretty_printers
                              if getattr(p, "name", None) != "orch-torch"]
    gdb.pretty_printers.insert(0, lookup)
