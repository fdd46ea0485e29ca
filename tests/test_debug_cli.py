"""Command-line debugging with the generated files: `lldb -b -S .lldbinit` through the
.orch/bin wrapper (the toolchain's lldb-14) and `gdb -batch -x .gdbinit` both stop in
demo::native::add_kernel, show the checkout's source line and read alpha back."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import copy_project, make_store, run_doit

SCRIPT = "import demo\nprint('result', demo.add([1.0, 2.0], [10.0, 20.0], alpha=2.5))\n"
KERNEL = "recipes/demo/ops/add_kernel.cpp"


@pytest.fixture(scope="module")
def ws(tmp_path_factory, session_toolchain) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("debug-cli")
    root = copy_project(base / "checkout")
    store = make_store(base / "store", session_toolchain)
    for args in (("switch", "variant=relwithdebinfo", "substitute=0"), ("vscode",)):
        res = run_doit(root, *args, f"store={store}")
        assert res.returncode == 0, res.output
    script = base / "call_add.py"
    script.write_text(SCRIPT)
    return root, script


def source_line(root: Path, line: int) -> str:
    return (root / KERNEL).read_text().splitlines()[line - 1].strip()


def test_lldb_batch_with_generated_lldbinit(ws: tuple[Path, Path]) -> None:
    root, script = ws
    python = root / ".orch/toolchain/venv/bin/python"
    out = subprocess.run(
        [str(root / ".orch/bin/lldb"), "-b", "-S", str(root / ".lldbinit"),
         "-o", "breakpoint set -n demo::native::add_kernel", "-o", "run",
         "-o", "frame variable alpha", "-o", "source info", "--", str(python), str(script)],
        cwd=script.parent, capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    m = re.search(r"frame #0: .*add_kernel\(.*\) at add_kernel\.cpp:(\d+)", text)
    assert m, text
    line = int(m.group(1))
    # lldb printed the line from the checkout (found through target.source-map).
    assert re.search(rf"-> +{line}\s+{re.escape(source_line(root, line))}", text), text
    assert "(double) alpha = 2.5" in text, text
    assert "error:" not in text.replace("error: There is a .lldbinit", ""), text


@pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")
def test_gdb_batch_with_generated_gdbinit(ws: tuple[Path, Path]) -> None:
    root, script = ws
    python = root / ".orch/toolchain/venv/bin/python"
    # A pending breakpoint also lands on the add_kernel@plt stub (no source); go on from it.
    skip_plt = ('python (gdb.execute("continue") '
                'if gdb.selected_frame().find_sal().symtab is None else None)')
    out = subprocess.run(
        ["gdb", "-batch", "-nx", "-x", str(root / ".gdbinit"),
         "-ex", "break demo::native::add_kernel", "-ex", "run", "-ex", skip_plt,
         "-ex", "print alpha", "-ex", "info source", "--args", str(python), str(script)],
        cwd=script.parent, capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    m = re.search(r"add_kernel \(self=.*\) at /orch/src/demo/ops/add_kernel\.cpp:(\d+)\n(\d+)\t(.*)",
                  text)
    assert m, text
    line = int(m.group(1))
    assert int(m.group(2)) == line and m.group(3).strip() == source_line(root, line), text
    assert re.search(r"\$1 = 2\.5\b", text), text
    # gdb read the file from this checkout (substitute-path), not from /orch/src.
    assert f"Located in {root / KERNEL}" in text, text


def test_unpacked_lldb_has_its_python_after_the_toolchain_fixups(session_toolchain: Path) -> None:
    """debugger_env.fixup (run by the toolchain) makes lldb's script interpreter and a plain
    Python 3.11 `import lldb` work from the unpacked debs, without root or /usr."""
    from orchestrator.debugger_env import fixup, require

    tools = require(session_toolchain / "debs" / "root")
    assert fixup(tools.deb_root) == []          # already applied, and idempotent
    inside = subprocess.run([str(tools.lldb), "-b", "-o", "script import lldb; print(lldb.__file__)"],
                            env=tools.env(), capture_output=True, text=True, timeout=60)
    assert str(tools.deb_root) in inside.stdout and "Error" not in inside.stdout + inside.stderr, \
        inside.stdout + inside.stderr
    plain = subprocess.run(["/usr/bin/python3", "-c",
                            "import lldb; print(lldb.SBDebugger.GetVersionString())"],
                           env=tools.python_env(), capture_output=True, text=True, timeout=60)
    assert plain.returncode == 0 and "lldb version 14" in plain.stdout, plain.stderr
