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
