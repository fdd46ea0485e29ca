"""The PyTorch type printers on real c10 types in a GCC -O0 build against the locked torch
wheel's headers and libc10: lldb-14 (the generated .lldbinit's script) and gdb (the
.gdbinit's) print IntArrayRef, SmallVector, std::optional (engaged and empty), Scalar
(double, int), ScalarType and Device as a PyTorch developer reads them, from memory only."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orchestrator.toolchain.debugger_env import locate

SCRIPTS = Path(__file__).parents[1] / "orchestrator/ide/debugger_scripts"
PROGRAM = """\
#include <c10/core/Device.h>
#include <c10/core/Scalar.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>
#include <cstdint>
#include <cstdio>
#include <optional>

namespace orch_probe {
__attribute__((noinline)) int stop_here(
    c10::IntArrayRef sizes, const c10::SmallVector<int64_t, 4>& dims, std::optional<int64_t> dim,
    std::optional<int64_t> none, const c10::Scalar& alpha, const c10::Scalar& count,
    c10::ScalarType dtype, c10::Device device) {
  return static_cast<int>(sizes.size() + dims.size() + dim.value_or(0) + none.value_or(0) +
                          alpha.toDouble() + count.toLong() + static_cast<int>(dtype) +
                          device.index());
}
}  // namespace orch_probe

int main() {
  int64_t raw[] = {2, 3, 5};
  c10::SmallVector<int64_t, 4> dims = {7, 11};
  std::printf("%d\\n", orch_probe::stop_here(c10::IntArrayRef(raw, 3), dims, 1, std::nullopt,
                                            c10::Scalar(2.5), c10::Scalar(int64_t{3}),
                                            c10::ScalarType::Float,
                                            c10::Device(c10::DeviceType::CPU, 0)));
  return 0;
}
"""
# What each parameter reads as, in both debuggers (gdb's own std::optional printer words the
# optionals its way; lldb's are ours).
EXPECTED = {"sizes": "[2, 3, 5]", "dims": "[7, 11]", "alpha": "double 2.5", "count": "int 3",
            "dtype": "Float", "device": "cpu:0"}


@pytest.fixture(scope="module")
def program(tmp_path_factory, session_toolchain: Path) -> Path:
    tmp = tmp_path_factory.mktemp("c10-types")
    torch = next((session_toolchain / "venv/lib").glob("python3*/site-packages/torch"))
    (tmp / "types.cpp").write_text(PROGRAM)
    subprocess.run(["g++", "-std=c++20", "-O0", "-g", "-gdwarf-4",
                    "-fno-reorder-blocks-and-partition", f"-I{torch / 'include'}",
                    str(tmp / "types.cpp"), f"-L{torch / 'lib'}", "-lc10",
                    f"-Wl,-rpath,{torch / 'lib'}", "-o", str(tmp / "types")], check=True)
    return tmp / "types"


def test_lldb_prints_c10_types(program: Path, session_toolchain: Path) -> None:
    tools = locate(session_toolchain / "debs" / "root")
    assert tools is not None
    out = subprocess.run(
        [str(tools.lldb), "-b", "-x", "-o", f"command script import {SCRIPTS / 'lldb_orch.py'}",
         "-o", "breakpoint set -n orch_probe::stop_here", "-o", "run", "-o", "frame variable",
         "--", str(program)], env=tools.python_env(), capture_output=True, text=True, timeout=180)
    text = out.stdout + out.stderr
    lines = text.split("(lldb) frame variable", 1)[1].splitlines()
    for name, shown in {**EXPECTED, "dim": "1", "none": "nullopt"}.items():
        assert any(ln.rstrip(": {").endswith(f") {name} = {shown}") or
                   (f") {name} = 0x" in ln and ln.rstrip(": {").endswith(f" {shown}"))
                   for ln in lines), (name, text[-3000:])
    assert "dtype = Float Float" not in text and "<invalid>" not in text


def test_gdb_prints_c10_types(program: Path) -> None:
    out = subprocess.run(
        ["gdb", "-batch", "-nx", "-ex", f"source {SCRIPTS / 'gdb_orch.py'}",
         "-ex", "break orch_probe::stop_here", "-ex", "run", "-ex", "info args", str(program)],
        capture_output=True, text=True, timeout=180)
    args = dict(ln.split(" = ", 1) for ln in out.stdout.split("\n15\t", 1)[1].splitlines()[1:]
                if " = " in ln)
    for name, shown in EXPECTED.items():
        assert args.get(name) == shown, (name, out.stdout[-2000:])
    assert args["dim"].endswith("= {[contained value] = 1}") and "no contained value" in args["none"]
