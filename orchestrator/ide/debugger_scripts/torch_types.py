"""PyTorch's C++ types as text, read from the process's memory only (no code run in it, so
they work on core files, GCC builds and the locked torch wheel, whose libraries carry no
DWARF: c10::TensorImpl is only a declaration in an extension's debug info). Shared by the
lldb summaries and the gdb pretty printers; the debugger gives `read(address, size)`.

LAYOUTS: the x86_64 layouts of the torch versions this project builds or pins (offsetof over
their own headers: 2.13.0, the locked wheel's, compared by tests/test_debug_torchext.py; 2.6.0,
the pytorch2 recipe's, by tests/test_pytorch2_build.py). A debugger does not know which torch
a process loaded, so each TensorImpl is read with the layout that last read one, then the
others: a layout that does not fit reads as corrupt. Anything implausible under every layout
(freed: refcount 0; corrupt: numel != product of sizes, dim > 64, unknown dtype or device)
reads `<invalid>`, never a hang."""
from __future__ import annotations

import math
import struct
from collections.abc import Callable

Read = Callable[[int, int], bytes]
TORCH_VERSION = "2.13.0"   # the locked wheel's (locks/torchext)
LAYOUT = {
    "impl.refcount": 8,                # intrusive_ptr_target::combined_refcount_ (after the vptr)
    "impl.storage": 16,                # TensorImpl::storage_ (intrusive_ptr<StorageImpl>)
    "impl.sizes_and_strides": 56,      # SizesAndStrides: size_, then the inline/out-of-line data
    "impl.storage_offset": 144,
    "impl.numel": 152,
    "impl.data_type": 160,             # caffe2::TypeMeta::index_ (== ScalarType for scalars)
    "impl.device_opt": 162,            # std::optional<Device>: type, index, engaged
    "sas.max_inline": 5,
    "storage.data": 16,                # StorageImpl::data_ptr_ (DataPtr: the data pointer first)
    "scalar.v": 16,                    # c10::Scalar: tag at 0, the value union at 16
}
# 2.6.0 (recipes/pytorch2.toml): TensorImpl has 8 bytes more before sizes_and_strides_.
LAYOUT_2_6 = {**LAYOUT, "impl.sizes_and_strides": 64, "impl.storage_offset": 152,
              "impl.numel": 160, "impl.data_type": 168, "impl.device_opt": 170}
LAYOUTS = {TORCH_VERSION: LAYOUT, "2.6.0": LAYOUT_2_6}
_order = list(LAYOUTS)   # the layout that read the last tensor first
SCALAR_TYPES = (
    "Byte Char Short Int Long Half Float Double ComplexHalf ComplexFloat ComplexDouble Bool "
    "QInt8 QUInt8 QInt32 BFloat16 QUInt4x2 QUInt2x4 Bits1x8 Bits2x4 Bits4x2 Bits8 Bits16 "
    "Float8_e5m2 Float8_e4m3fn Float8_e5m2fnuz Float8_e4m3fnuz UInt16 UInt32 UInt64 UInt1 "
    "UInt2 UInt3 UInt4 UInt5 UInt6 UInt7 Int1 Int2 Int3 Int4 Int5 Int6 Int7 Float8_e8m0fnu "
    "Float4_e2m1fn_x2").split()
ELEMENTS = {"Byte": "B", "Char": "b", "Short": "h", "Int": "i", "Long": "q", "Half": "e",
            "Float": "f", "Double": "d", "Bool": "?", "UInt16": "H", "UInt32": "I", "UInt64": "Q"}
DEVICE_TYPES = ("cpu cuda mkldnn opengl opencl ideep hip fpga maia xla vulkan metal xpu mps "
                "meta hpu ve lazy ipu mtia privateuseone").split()
SCALAR_TAGS = ("double", "int", "uint", "complex", "bool", "SymFloat", "SymInt", "SymBool")
MAX_DIM = 64
FIRST_ELEMENTS = 8
INVALID = "<invalid>"


class Invalid(Exception):
    pass


def _u(read: Read, addr: int, fmt: str) -> int:
    if addr < 4096:
        raise Invalid(f"address 0x{addr:x}")
    return struct.unpack("<" + fmt, read(addr, struct.calcsize(fmt)))[0]


def device_text(dtype: int, index: int) -> str:
    if not 0 <= dtype < len(DEVICE_TYPES):
        raise Invalid(f"device type {dtype}")
    return DEVICE_TYPES[dtype] + (f":{index}" if index >= 0 else "")


def scalar_type_text(value: int) -> str:
    if not 0 <= value < len(SCALAR_TYPES):
        raise Invalid(f"scalar type {value}")
    return SCALAR_TYPES[value]


def contiguous(sizes: list[int], strides: list[int]) -> bool:
    expected = 1
    for size, stride in zip(reversed(sizes), reversed(strides), strict=False):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def tensor_impl_text(read: Read, impl: int) -> str:
    """`Float[2, 3] strides=[3, 1] cpu offset=0 numel=6 = [0, 1, 2, 3, 4, 5]`; `undefined`
    for a null impl; INVALID when the memory is not a live TensorImpl."""
    if impl == 0:
        return "undefined tensor"
    for version in list(_order):
        try:
            text = _tensor_impl_text(read, impl, LAYOUTS[version])
        except (Invalid, struct.error, OverflowError, ValueError, IndexError, MemoryError):
            continue
        _order.remove(version)
        _order.insert(0, version)
        return text
    return INVALID


def _tensor_impl_text(read: Read, impl: int, layout: dict[str, int]) -> str:
    strong = _u(read, impl + layout["impl.refcount"], "Q") & 0xFFFFFFFF
    if strong == 0 or strong > 1 << 24:
        raise Invalid("freed")
    sas = impl + layout["impl.sizes_and_strides"]
    dim = _u(read, sas, "Q")
    if dim > MAX_DIM:
        raise Invalid(f"dim {dim}")
    inline = dim <= layout["sas.max_inline"]
    data = sas + 8 if inline else _u(read, sas + 8, "Q")
    sizes = list(struct.unpack(f"<{dim}q", read(data, 8 * dim))) if dim else []
    stride_at = data + 8 * (layout["sas.max_inline"] if inline else dim)
    strides = list(struct.unpack(f"<{dim}q", read(stride_at, 8 * dim))) if dim else []
    numel = _u(read, impl + layout["impl.numel"], "q")
    if any(s < 0 for s in sizes) or numel != math.prod(sizes):
        raise Invalid("numel")
    dtype = scalar_type_text(_u(read, impl + layout["impl.data_type"], "H"))
    dev_type, dev_index, engaged = struct.unpack("<bbB", read(impl + layout["impl.device_opt"], 3))
    device = device_text(dev_type, dev_index) if engaged == 1 else "no device"
    offset = _u(read, impl + layout["impl.storage_offset"], "q")
    text = (f"{dtype}{sizes} strides={strides} {device} offset={offset} numel={numel}")
    fmt = ELEMENTS.get(dtype)
    if device == "cpu" and fmt and numel and contiguous(sizes, strides):
        storage = _u(read, impl + layout["impl.storage"], "Q")
        base = _u(read, storage + layout["storage.data"], "Q")
        count = min(numel, FIRST_ELEMENTS)
        size = struct.calcsize(fmt)
        values = struct.unpack(f"<{count}{fmt}", read(base + offset * size, count * size))
        shown = ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)
        text += f" = [{shown}{', ...' if numel > count else ''}]"
    return text


def int_array_text(read: Read, data: int, length: int) -> str:
    """c10::IntArrayRef / SmallVector<int64_t> contents: `[2, 3]`."""
    if length == 0:
        return "[]"
    if not 0 < length <= 4096:
        return INVALID
    try:
        return str(list(struct.unpack(f"<{length}q", read(data, 8 * length))))
    except (Invalid, struct.error, MemoryError, OverflowError):
        return INVALID


def scalar_text(read: Read, addr: int) -> str:
    """c10::Scalar: `double 2.5`, `int 3`, `bool true`, `complex (1+2j)`."""
    try:
        tag = _u(read, addr, "i")
        v = addr + LAYOUT["scalar.v"]
        if tag == 0:
            return f"double {_f(read, v):g}"
        if tag == 1:
            return f"int {_u(read, v, 'q')}"
        if tag == 2:
            return f"uint {_u(read, v, 'Q')}"
        if tag == 3:
            return f"complex ({_f(read, v):g}{_f(read, v + 8):+g}j)"
        if tag == 4:
            return f"bool {'true' if _u(read, v, 'q') else 'false'}"
        if 5 <= tag <= 7:
            return f"{SCALAR_TAGS[tag]} (symbolic)"
        return INVALID
    except (Invalid, struct.error, MemoryError):
        return INVALID


def _f(read: Read, addr: int) -> float:
    return struct.unpack("<d", read(addr, 8))[0]
