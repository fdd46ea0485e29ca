"""The fields the debugger printers read (orchestrator/ide/debugger_scripts/torch_types.py),
compiled with offsetof against a torch's own headers: the test of each LAYOUTS entry."""
from __future__ import annotations

import subprocess
from pathlib import Path

MEMBERS = {"impl.storage": "offsetof(c10::TensorImpl, storage_)",
           "impl.sizes_and_strides": "offsetof(c10::TensorImpl, sizes_and_strides_)",
           "impl.storage_offset": "offsetof(c10::TensorImpl, storage_offset_)",
           "impl.numel": "offsetof(c10::TensorImpl, numel_)",
           "impl.data_type": "offsetof(c10::TensorImpl, data_type_)",
           "impl.device_opt": "offsetof(c10::TensorImpl, device_opt_)",
           "sas.max_inline": "C10_SIZES_AND_STRIDES_MAX_INLINE_SIZE",
           "storage.data": "offsetof(c10::StorageImpl, data_ptr_)",
           "scalar.v": "offsetof(c10::Scalar, v)",
           "impl.refcount": "sizeof(void*)",          # after the vptr
           "scalar_types": "(size_t)c10::ScalarType::NumOptions",
           "device_types": "(size_t)c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES"}


def compiled_layout(include: Path, work: Path, std: str = "c++20") -> dict[str, int]:
    """MEMBERS' values under the headers in `include` (g++, private members made public)."""
    src = work / "layout.cpp"
    src.write_text("#include <sstream>\n#include <string>\n#include <mutex>\n#include <optional>\n"
                   "#include <memory>\n#include <functional>\n#include <unordered_map>\n"
                   "#define private public\n#define protected public\n"
                   "#include <c10/core/TensorImpl.h>\n#include <c10/core/StorageImpl.h>\n"
                   "#include <c10/core/Scalar.h>\n#include <cstdio>\n#include <cstddef>\n"
                   "int main() {\n" + "".join(f'  std::printf("{k} %zu\\n", (size_t)({e}));\n'
                                             for k, e in MEMBERS.items()) + "}\n")
    subprocess.run(["g++", f"-std={std}", "-w", f"-I{include}", str(src), "-o",
                    str(work / "layout")], check=True, timeout=300)
    out = subprocess.run([str(work / "layout")], capture_output=True, text=True, check=True).stdout
    return {k: int(v) for k, v in (ln.split() for ln in out.splitlines())}
