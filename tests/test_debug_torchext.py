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
from torch_layout import compiled_layout

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
    got = compiled_layout(site / "torch/include", tmp_path)
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


def _tensor_image(layout: dict[str, int]):
    """A Float[2, 3] CPU TensorImpl (values 0..5) laid out as `layout` says, in fake memory."""
    import struct
    impl, storage, data = 0x10000, 0x20000, 0x30000
    flat = bytearray(0x40000)

    def put(addr: int, fmt: str, *values) -> None:
        packed = struct.pack("<" + fmt, *values)
        flat[addr:addr + len(packed)] = packed
    sas = impl + layout["impl.sizes_and_strides"]
    put(impl + layout["impl.refcount"], "Q", 1)
    put(sas, "Q", 2)
    put(sas + 8, "2q", 2, 3)
    put(sas + 8 + 8 * layout["sas.max_inline"], "2q", 3, 1)
    put(impl + layout["impl.numel"], "q", 6)
    put(impl + layout["impl.data_type"], "H", 6)                 # Float
    put(impl + layout["impl.device_opt"], "bbB", 0, -1, 1)       # cpu, engaged
    put(impl + layout["impl.storage_offset"], "q", 0)
    put(impl + layout["impl.storage"], "Q", storage)
    put(storage + layout["storage.data"], "Q", data)
    put(data, "6f", *range(6))
    return impl, lambda addr, size: bytes(flat[addr:addr + size])


def test_a_tensor_reads_in_the_layout_of_its_torch_version() -> None:
    """2.6.0's TensorImpl is not 2.13.0's: each reads right, in any order (the printers cannot
    know which torch a process loaded), and one layout does not read the other's tensor."""
    from orchestrator.ide.debugger_scripts import torch_types as tt
    expected = "Float[2, 3] strides=[3, 1] cpu offset=0 numel=6 = [0, 1, 2, 3, 4, 5]"
    impl26, read26 = _tensor_image(tt.LAYOUTS["2.6.0"])
    impl213, read213 = _tensor_image(tt.LAYOUTS["2.13.0"])
    for impl, read in ((impl26, read26), (impl213, read213), (impl26, read26)):
        assert tt.tensor_impl_text(read, impl) == expected
    with pytest.raises(tt.Invalid):
        tt._tensor_impl_text(read26, impl26, tt.LAYOUTS["2.13.0"])
    with pytest.raises(tt.Invalid):
        tt._tensor_impl_text(read213, impl213, tt.LAYOUTS["2.6.0"])
