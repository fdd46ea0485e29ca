"""Debugging torchext (a libtorch op against the locked torch wheel, whose libraries carry no
DWARF) with the pinned lldb-14: `doit verify` proves each debuggable library readable by
lldb-14 and names the flags a variant lacks; at a breakpoint in scaled_add.cpp lldb reads
the parameters (the regression: it read nothing, and `p a` printed a libm global)."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import copy_project, make_store, run_doit

from orchestrator.verify.lldb_reading import probe

SCRIPT = """\
import torch
import torchext


def inner(a, b):
    return torch.ops.torchext.scaled_add(a, b, 2.5)


def outer():
    a = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    return inner(a, torch.ones(2, 3))


print("result", outer().tolist())
"""


class Ws:
    def __init__(self, root: Path, store: Path, script: Path) -> None:
        self.root, self.store, self.script = root, store, script

    def doit(self, *args: str) -> tuple[int, str]:
        res = run_doit(self.root, *args, f"store={self.store}")
        return res.returncode, res.output

    def lldb(self, *commands: str, timeout: float = 180) -> str:
        argv = [str(self.root / ".orch/bin/lldb"), "-b", "-S", str(self.root / ".lldbinit")]
        for c in commands:
            argv += ["-o", c]
        argv += ["--", str(self.root / ".orch/toolchain/venv/bin/python"), str(self.script)]
        out = subprocess.run(argv, cwd=self.root, capture_output=True, text=True, timeout=timeout)
        return out.stdout + out.stderr


@pytest.fixture(scope="module")
def ws(tmp_path_factory, session_toolchain) -> Ws:
    base = tmp_path_factory.mktemp("debug-torchext")
    w = Ws(copy_project(base / "checkout"), make_store(base / "store", session_toolchain),
           base / "two_levels.py")
    for args in (("switch", "recipe=torchext", "variant=relwithdebinfo", "substitute=0"),
                 ("vscode",)):
        code, out = w.doit(*args)
        assert code == 0, out
    w.script.write_text(SCRIPT)
    return w


def test_relwithdebinfo_parameters_are_read_by_the_pinned_lldb(ws: Ws, session_toolchain: Path) -> None:
    lib = next((ws.root / ".orch/profile/prefix/lib").glob("libtorchext.so*")).resolve()
    python = Path("/usr/bin/python3")
    [result] = probe(session_toolchain / "debs" / "root", python, [lib], sample=8).values()
    by_name = {f["name"]: f for f in result["functions"]}
    [scaled] = [f for n, f in by_name.items() if n.startswith("torchext::scaled_add(")]
    assert scaled["function"] and scaled["parameters"] == ["a", "b", "alpha"], scaled
    assert scaled["located"] == ["a", "b", "alpha"], scaled


def test_breakpoint_in_scaled_add_reads_its_parameters(ws: Ws) -> None:
    # -K false: at the entry address (past the prologue, frame #0 is an inlined TensorImpl
    # method and -O2 keeps alpha only in xmm0 until the tail call).
    text = ws.lldb("breakpoint set -n torchext::scaled_add -K false", "run", "frame variable alpha",
                   "p alpha", "frame variable a b")
    assert re.search(r"frame #0: .*torchext::scaled_add\(.*\) at scaled_add\.cpp:\d+", text), text
    assert "(double) alpha = 2.5" in text, text
    assert re.search(r"\(double\) \$0 = 2\.5", text), text          # not a libm global
    assert re.search(r"\(const at::Tensor &\) a = ", text), text
    assert "(const mynumber)" not in text, text


def test_gcc_defaults_fail_verify_naming_the_flags(ws: Ws) -> None:
    """GCC 12's defaults (DWARF 5, hot/cold split): the build's verify fails, one line naming
    the library, the function lldb-14 could not read and the flags to add."""
    code, out = ws.doit("build", "recipe=torchext", "variant=gcc-defaults", "substitute=0")
    assert code == 1 and "verify failed" in out, out
    [failed] = (ws.store / "tmp").glob("failed-*-torchext-gcc-defaults")
    report = json.loads((failed / "meta/verify.json").read_text())
    [finding] = [f for f in report["findings"] if f["check"] == "debug_info"
                 and f["severity"] == "fail"]
    assert finding["file"] == "prefix/lib/libtorchext.so", finding
    assert re.match(r"the pinned lldb-14 cannot read \S.* \(/orch/src/torchext/csrc/"
                    r"scaled_add\.cpp:\d+\): ", finding["cause"]), finding
    assert finding["cause"].endswith(
        'add cflags = ["-gdwarf-4", "-fno-reorder-blocks-and-partition"] to '
        "[variants.gcc-defaults] of recipes/torchext.toml"), finding


TENSOR_A = "Float[2, 3] strides=[3, 1] cpu offset=0 numel=6 = [0, 1, 2, 3, 4, 5]"
TENSOR_B = "Float[2, 3] strides=[3, 1] cpu offset=0 numel=6 = [1, 1, 1, 1, 1, 1]"
# A Tensor whose impl pointer is garbage: b's object read 4 bytes off.
BAD_TENSOR_LLDB = ('script b = lldb.frame.FindVariable("b").Dereference(); '
                   'print("bad:", b.CreateValueFromAddress("bad", b.GetLoadAddress() + 4, '
                   'b.GetType()).GetSummary())')


def test_lldb_reads_tensors_of_the_dwarfless_torch_wheel_without_running_code(ws: Ws) -> None:
    """The generated .lldbinit loads the summaries: at::Tensor (through a reference and as
    its intrusive_ptr) shows dtype, sizes, strides, device, offset, numel and the first
    elements, although the wheel's c10::TensorImpl has no DWARF (lldb itself cannot even
    dereference it); garbage reads <invalid>. Nothing is evaluated in the process."""
    # lldb -b stops at the first failing command: the dereference lldb refuses goes last.
    text = ws.lldb("breakpoint set -n torchext::scaled_add -K false", "run",
                   "frame variable a b", "frame variable a.impl_", BAD_TENSOR_LLDB, "py-bt -p",
                   "frame variable *a.impl_.target_")
    assert re.search(rf"\(const at::Tensor &\) a = 0x[0-9a-f]+ {re.escape(TENSOR_A)}", text), text
    assert re.search(rf"\(const at::Tensor &\) b = 0x[0-9a-f]+ {re.escape(TENSOR_B)}", text), text
    assert f"a.impl_ = {TENSOR_A}" in text, text
    assert "dereference failed" in text, text        # the wheel's TensorImpl: no DWARF
    assert "bad: <invalid>" in text, text
    py = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("Python ")]
    assert [p.rsplit(":", 1)[-1] for p in py[-3:]] == ["inner", "outer", "<module>"], text


def test_gdb_prints_tensors_with_the_generated_gdbinit(ws: Ws) -> None:
    skip_plt = ('python (gdb.execute("continue") '
                'if gdb.selected_frame().find_sal().symtab is None else None)')
    out = subprocess.run(
        ["gdb", "-batch", "-nx", "-x", str(ws.root / ".gdbinit"), "-ex", "break torchext::scaled_add",
         "-ex", "run", "-ex", skip_plt, "-ex", "info args", "-ex", "print a.impl_",
         "-ex", "print *(at::Tensor*)((char*)&b + 4)", "-ex", "print (c10::ScalarType)6",
         "--args", str(ws.root / ".orch/toolchain/venv/bin/python"), str(ws.script)],
        cwd=ws.root, capture_output=True, text=True, timeout=180)
    text = out.stdout + out.stderr
    assert f"a = {TENSOR_A}\nb = {TENSOR_B}\nalpha = 2.5\n" in text, text
    assert f"$1 = {TENSOR_A}" in text, text
    assert "$2 = <invalid>" in text, text
    assert "$3 = Float" in text, text


def test_torch_layout_matches_the_locked_wheels_headers(ws: Ws, tmp_path: Path) -> None:
    """The printers' TensorImpl layout, compiled with offsetof against the locked torch
    wheel's own headers (a torch bump that moves a field fails here)."""
    from orchestrator.ide.debugger_scripts import torch_types as tt
    site = next((ws.root / ".orch/toolchain/venv/lib").glob("python3.*/site-packages"))
    version = (site / "torch/version.py").read_text()
    assert re.search(r"__version__ = ['\"]([^'\"+]+)", version).group(1) == tt.TORCH_VERSION, version
    members = {"impl.storage": "offsetof(c10::TensorImpl, storage_)",
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
    src = tmp_path / "layout.cpp"
    src.write_text("#include <sstream>\n#include <string>\n#include <mutex>\n#include <optional>\n"
                   "#include <memory>\n#include <functional>\n#include <unordered_map>\n"
                   "#define private public\n#define protected public\n"
                   "#include <c10/core/TensorImpl.h>\n#include <c10/core/StorageImpl.h>\n"
                   "#include <c10/core/Scalar.h>\n#include <cstdio>\n#include <cstddef>\n"
                   "int main() {\n" + "".join(f'  std::printf("{k} %zu\\n", (size_t)({e}));\n'
                                             for k, e in members.items()) + "}\n")
    subprocess.run(["g++", "-std=c++20", "-w", f"-I{site / 'torch/include'}", str(src), "-o",
                    str(tmp_path / "layout")], check=True, timeout=300)
    got = {k: int(v) for k, v in (ln.split() for ln in subprocess.run(
        [str(tmp_path / "layout")], capture_output=True, text=True, check=True).stdout.splitlines())}
    assert got.pop("scalar_types") == len(tt.SCALAR_TYPES) + 1      # + UNKNOWN_SCALAR
    assert got.pop("device_types") == len(tt.DEVICE_TYPES)
    assert got == tt.LAYOUT


def test_printers_on_freed_or_corrupt_memory_say_invalid_and_end() -> None:
    import random

    from orchestrator.ide.debugger_scripts import torch_types as tt
    rng = random.Random(4)
    for _ in range(300):
        blob = bytes(rng.getrandbits(8) for _ in range(2048))

        def read(addr: int, size: int, blob: bytes = blob) -> bytes:
            if size > 1 << 16:
                raise tt.Invalid("too big")
            off = addr % 2000
            return (blob[off:off + size] + bytes(size))[:size]
        text = tt.tensor_impl_text(read, 0x10000 + rng.getrandbits(12))
        assert text == tt.INVALID or "numel=" in text
    zeros = tt.tensor_impl_text(lambda a, n: bytes(n), 0x10000)       # freed: refcount 0
    assert zeros == tt.INVALID
    assert tt.scalar_text(lambda a, n: bytes(n), 0x10000) == "double 0"
