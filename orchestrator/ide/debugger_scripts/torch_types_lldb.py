"""lldb type summaries for PyTorch's C++ types (torch_types reads the memory; nothing runs in
the process). Registered by lldb_orch in the category `orch-torch`."""
from __future__ import annotations

import lldb  # type: ignore[import-not-found]
import torch_types as tt
from lldb_memory import memory_reader

CATEGORY = "orch-torch"
SUMMARIES = {
    "tensor_summary": r"^at::(Tensor|TensorBase)$",
    "tensor_impl_summary": r"^c10::TensorImpl$",
    "intrusive_ptr_summary": r"^c10::intrusive_ptr<.+>$",
    "int_array_summary": r"^c10::ArrayRef<long>$",
    "small_vector_summary": r"^c10::SmallVector<.+>$",
    "optional_summary": r"^(c10|std)::optional<.+>$",
    "scalar_summary": r"^c10::Scalar$",
    "scalar_type_summary": r"^c10::ScalarType$",
    "device_summary": r"^c10::Device$",
}


def _reader(value: lldb.SBValue):
    return memory_reader(value.GetProcess(), tt.Invalid)


def _deref(value: lldb.SBValue) -> lldb.SBValue:
    value = value.GetNonSyntheticValue()
    return value.Dereference() if value.GetType().IsReferenceType() else value


def _child(value: lldb.SBValue, *path: str) -> lldb.SBValue | None:
    for name in path:
        value = value.GetChildMemberWithName(name)
        if not value.IsValid():
            return None
    return value


def _address(value: lldb.SBValue) -> int:
    addr = value.GetLoadAddress()
    if addr == lldb.LLDB_INVALID_ADDRESS:
        raise tt.Invalid("not in memory")
    return addr


def _pointer_at(value: lldb.SBValue) -> int:
    """The first word of the object: intrusive_ptr's target_ (its only member)."""
    return int.from_bytes(_reader(value)(_address(value), 8), "little")


def tensor_summary(valobj, internal_dict):  # noqa: ARG001
    value = _deref(valobj)
    try:
        target = _child(value, "impl_", "target_") or _child(value, "at::TensorBase", "impl_", "target_")
        impl = target.GetValueAsUnsigned() if target is not None else _pointer_at(value)
    except tt.Invalid:
        return tt.INVALID
    return tt.tensor_impl_text(_reader(value), impl)


def _text_at_address(valobj, text) -> str:
    """text(read, address) of the object lldb shows (a reference followed), or <invalid>."""
    value = _deref(valobj)
    try:
        return text(_reader(value), _address(value))
    except tt.Invalid:
        return tt.INVALID


def tensor_impl_summary(valobj, internal_dict):  # noqa: ARG001
    return _text_at_address(valobj, tt.tensor_impl_text)


def intrusive_ptr_summary(valobj, internal_dict):  # noqa: ARG001
    value = _deref(valobj)
    try:
        target = _child(value, "target_")
        ptr = target.GetValueAsUnsigned() if target is not None else _pointer_at(value)
    except tt.Invalid:
        return tt.INVALID
    if "TensorImpl" in value.GetType().GetName():
        return tt.tensor_impl_text(_reader(value), ptr)
    return f"0x{ptr:x}" if ptr else "null"


def int_array_summary(valobj, internal_dict):  # noqa: ARG001
    value = _deref(valobj)
    data = _find(value, "Data") or _find(value, "Data_")
    length = _find(value, "Length")
    if data is None or length is None:
        return tt.INVALID
    return tt.int_array_text(_reader(value), data.GetValueAsUnsigned(), length.GetValueAsUnsigned())


def small_vector_summary(valobj, internal_dict):  # noqa: ARG001
    value = _deref(valobj)
    begin, size = _find(value, "BeginX"), _find(value, "Size")
    if begin is None or size is None:
        return tt.INVALID
    n = size.GetValueAsUnsigned()
    args = value.GetType().GetTemplateArgumentType(0)
    if args.IsValid() and args.GetByteSize() == 8 and args.GetBasicType() in (
            lldb.eBasicTypeLong, lldb.eBasicTypeLongLong):
        return tt.int_array_text(_reader(value), begin.GetValueAsUnsigned(), n)
    return f"size={n}"


def _find(value: lldb.SBValue, name: str, depth: int = 4) -> lldb.SBValue | None:
    """A member of value or of one of its base classes."""
    found = value.GetChildMemberWithName(name)
    if found.IsValid():
        return found
    if depth == 0:
        return None
    for i in range(value.GetNumChildren()):
        child = value.GetChildAtIndex(i)
        if child.GetType().GetTypeClass() in (lldb.eTypeClassClass, lldb.eTypeClassStruct,
                                              lldb.eTypeClassUnion):
            hit = _find(child, name, depth - 1)
            if hit is not None:
                return hit
    return None


def optional_summary(valobj, internal_dict):  # noqa: ARG001
    value = _deref(valobj)
    engaged = _find(value, "_M_engaged", 6)
    if engaged is None:
        return tt.INVALID
    if not engaged.GetValueAsUnsigned():
        return "nullopt"
    inner = _find(value, "_M_value", 8)
    if inner is None:
        return "engaged"
    return inner.GetSummary() or inner.GetValue() or "engaged"


def scalar_summary(valobj, internal_dict):  # noqa: ARG001
    return _text_at_address(valobj, tt.scalar_text)


def scalar_type_summary(valobj, internal_dict):  # noqa: ARG001
    value = _deref(valobj)
    try:
        text = tt.scalar_type_text(value.GetValueAsSigned())
    except tt.Invalid:
        return tt.INVALID
    return "" if value.GetValue() == text else text  # lldb already names it from the DWARF


def device_summary(valobj, internal_dict):  # noqa: ARG001
    value = _deref(valobj)
    try:
        kind, index = _child(value, "type_"), _child(value, "index_")
        if kind is not None and index is not None:
            return tt.device_text(kind.GetValueAsSigned(), index.GetValueAsSigned())
        raw = _reader(value)(_address(value), 2)
        return tt.device_text(int.from_bytes(raw[:1], "little", signed=True),
                              int.from_bytes(raw[1:], "little", signed=True))
    except tt.Invalid:
        return tt.INVALID


def __lldb_init_module(debugger, internal_dict):  # noqa: N807 (lldb's hook)
    register(debugger)


def register(debugger: lldb.SBDebugger) -> None:
    for function, regex in SUMMARIES.items():
        debugger.HandleCommand(f'type summary add -w {CATEGORY} -F {__name__}.{function} '
                               f'-x "{regex}"')
    debugger.HandleCommand(f"type category enable {CATEGORY}")
