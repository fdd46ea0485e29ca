"""Command-line debugging with the generated files: `lldb -b -S .lldbinit` through the
.orch/bin wrapper (the toolchain's lldb-14) and `gdb -batch -x .gdbinit` both stop in
demo::native::add_kernel, show the checkout's source line and read alpha back."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
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
    from orchestrator.toolchain.debugger_env import fixup, require

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


TWO_LEVELS = """\
import demo


def inner(x):
    return demo.add(x, [10.0, 20.0], alpha=2.5)


def outer():
    return inner([1.0, 2.0])


print(outer())
"""


def python_lines_after_eval(text: str) -> list[str]:
    """The `Python file:line:function` lines that follow a _PyEval_EvalFrameDefault frame."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if "_PyEval_EvalFrameDefault" in ln)
    out = []
    for ln in lines[start + 1:]:
        if not ln.strip().startswith("Python "):
            break
        out.append(ln.strip()[len("Python "):])
    return out


def test_lldb_py_bt_shows_the_python_frames_among_the_c_frames(ws: tuple[Path, Path]) -> None:
    """`py-bt` (loaded by the generated .lldbinit) at a C++ breakpoint reached from a
    two-level Python call chain: file:line:function of both Python functions, under the
    _PyEval_EvalFrameDefault frame that runs them, read from memory only."""
    root, script = ws
    two = script.with_name("two_levels.py")
    two.write_text(TWO_LEVELS)
    out = subprocess.run(
        [str(root / ".orch/bin/lldb"), "-b", "-S", str(root / ".lldbinit"),
         "-o", "breakpoint set -n demo::native::add_kernel", "-o", "run", "-o", "py-bt",
         "--", str(root / ".orch/toolchain/venv/bin/python"), str(two)],
        cwd=root, capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    assert "error:" not in text, text   # nor the cwd .lldbinit "is not being read" one
    frames = python_lines_after_eval(text)
    assert frames[-3:] == [f"{two}:5:inner", f"{two}:9:outer", f"{two}:12:<module>"], text
    assert frames[0].endswith("demo/__init__.py:7:add"), text


@pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")
def test_gdb_py_bt_shows_the_python_frames(ws: tuple[Path, Path]) -> None:
    root, script = ws
    two = script.with_name("two_levels.py")
    two.write_text(TWO_LEVELS)
    skip_plt = ('python (gdb.execute("continue") '
                'if gdb.selected_frame().find_sal().symtab is None else None)')
    out = subprocess.run(
        ["gdb", "-batch", "-nx", "-x", str(root / ".gdbinit"), "-ex", "break demo::native::add_kernel",
         "-ex", "run", "-ex", skip_plt, "-ex", "py-bt", "-ex", "orch-py-bt -p",
         "--args", str(root / ".orch/toolchain/venv/bin/python"), str(two)],
        cwd=root, capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    assert "Undefined command" not in text, text
    frames = python_lines_after_eval(text)
    assert frames[-3:] == [f"{two}:5:inner", f"{two}:9:outer", f"{two}:12:<module>"], text
    assert f"  Python {two}:9:outer" in text.split("Python frames:")[-1], text


def test_cpython_offsets_match_the_locked_interpreters_headers(tmp_path: Path) -> None:
    """The frame walker's CPython 3.11 offsets, compiled with offsetof against the locked
    interpreter's own headers (a new interpreter minor version fails here first)."""
    from orchestrator.ide.debugger_scripts.cpython_frames import OFFSETS
    include = subprocess.run(["/usr/bin/python3", "-c",
                              "import sysconfig; print(sysconfig.get_paths()['include'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    fields = {"runtime.interpreters_head": ("_PyRuntimeState", "interpreters.head"),
              "interp.next": ("PyInterpreterState", "next"),
              "interp.threads_head": ("PyInterpreterState", "threads.head"),
              "tstate.next": ("PyThreadState", "next"), "tstate.cframe": ("PyThreadState", "cframe"),
              "tstate.native_thread_id": ("PyThreadState", "native_thread_id"),
              "cframe.current_frame": ("_PyCFrame", "current_frame"),
              "frame.f_code": ("_PyInterpreterFrame", "f_code"),
              "frame.previous": ("_PyInterpreterFrame", "previous"),
              "frame.prev_instr": ("_PyInterpreterFrame", "prev_instr"),
              "frame.is_entry": ("_PyInterpreterFrame", "is_entry"),
              "code.co_firstlineno": ("PyCodeObject", "co_firstlineno"),
              "code.co_filename": ("PyCodeObject", "co_filename"),
              "code.co_qualname": ("PyCodeObject", "co_qualname"),
              "code.co_linetable": ("PyCodeObject", "co_linetable"),
              "code.co_code_adaptive": ("PyCodeObject", "co_code_adaptive"),
              "str.length": ("PyASCIIObject", "length"), "str.state": ("PyASCIIObject", "state"),
              "bytes.size": ("PyVarObject", "ob_size"), "bytes.data": ("PyBytesObject", "ob_sval")}
    assert set(fields) == set(OFFSETS)
    prints = "".join(f'  printf("{k} %zu\\n", offsetof({t}, {f}));\n' for k, (t, f) in fields.items())
    src = tmp_path / "offsets.c"
    src.write_text("#define Py_BUILD_CORE 1\n#include <Python.h>\n#include <internal/pycore_frame.h>\n"
                   "#include <internal/pycore_runtime.h>\n#include <internal/pycore_interp.h>\n"
                   "#include <stddef.h>\n#include <stdio.h>\nint main(void) {\n" + prints + "}\n")
    subprocess.run(["gcc", f"-I{include}", str(src), "-o", str(tmp_path / "offsets")], check=True)
    got = dict(ln.split() for ln in subprocess.run([str(tmp_path / "offsets")], capture_output=True,
                                                    text=True, check=True).stdout.splitlines())
    assert {k: int(v) for k, v in got.items()} == OFFSETS


def test_frame_walker_on_bad_memory_says_invalid_and_ends() -> None:
    """Freed or corrupt interpreter memory: Invalid (py-bt prints `<invalid>`), never a hang."""
    import random

    from orchestrator.ide.debugger_scripts import cpython_frames as cf

    rng = random.Random(30)
    for _ in range(200):
        blob = bytes(rng.getrandbits(8) for _ in range(4096))

        def read(addr: int, size: int, blob: bytes = blob) -> bytes:
            off = addr % 4000
            return (blob[off:off + size] + bytes(size))[:size]
        try:
            frames = cf.python_frames(read, 0x1000, rng.getrandbits(16))
        except cf.Invalid:
            continue
        assert len(frames) <= cf.MAX_FRAMES


def test_gdb_index_cache_is_kept_in_the_workspace(ws: tuple[Path, Path]) -> None:
    """gdb's index cache (turned on by the generated .gdbinit) holds the artifact's library
    after a session: the next start reads its index instead of building it."""
    root, script = ws
    subprocess.run(["gdb", "-batch", "-nx", "-x", str(root / ".gdbinit"),
                    "-ex", "break demo::native::add_kernel", "-ex", "run",
                    "--args", str(root / ".orch/toolchain/venv/bin/python"), str(script)],
                   cwd=root, capture_output=True, text=True, timeout=120, check=True)
    ops = next((root / ".orch/profile/prefix/lib").glob("libdemo_ops.so*")).resolve()
    build_id = re.search(r"Build ID: ([0-9a-f]+)", subprocess.run(
        ["readelf", "-n", str(ops)], capture_output=True, text=True, check=True).stdout).group(1)
    assert (root / f".orch/gdb-index-cache/{build_id}.gdb-index").is_file()


def test_debuggers_do_not_depend_on_the_callers_python_environment(ws: tuple[Path, Path]) -> None:
    """An activated venv, PYTHONPATH, PYTHONHOME: the wrappers' lldb, lldb-vscode and gdb
    keep their own Python (PYTHONHOME would otherwise kill gdb's: No module named
    'encodings'; the venv first on PATH lldb's: No module named 'six'), and py-bt runs."""
    root, script = ws
    venv = Path(sys.prefix)
    hostile = {**os.environ, "VIRTUAL_ENV": str(venv), "PATH": f"{venv}/bin:{os.environ['PATH']}",
               "PYTHONPATH": "/nonexistent-python-path"}
    for argv in ([str(root / ".orch/bin/lldb"), "-b", "-o", "script import lldb, six; print('py', 42)"],
                 [str(root / ".orch/bin/gdb"), "-batch", "-nx", "-ex", "python print('py', 42)"]):
        out = subprocess.run(argv, env={**hostile, "PYTHONHOME": "/nonexistent-home"}, cwd=root,
                             capture_output=True, text=True, timeout=60)
        assert "py 42" in out.stdout and "rror" not in out.stdout + out.stderr, out.stdout + out.stderr
    adapter = subprocess.run([str(root / ".orch/bin/lldb-vscode"), "--help"],
                             env={**hostile, "PYTHONHOME": "/nonexistent-home"},
                             capture_output=True, text=True, timeout=60)
    assert adapter.returncode == 0, adapter.stderr
    two = script.with_name("two_levels.py")
    two.write_text(TWO_LEVELS)
    for argv in ([str(root / ".orch/bin/lldb"), "-b", "-S", str(root / ".lldbinit"),
                  "-o", "breakpoint set -n demo::native::add_kernel", "-o", "run", "-o", "py-bt -p",
                  "--", str(root / ".orch/toolchain/venv/bin/python"), str(two)],
                 [str(root / ".orch/bin/gdb"), "-batch", "-nx", "-x", str(root / ".gdbinit"),
                  "-ex", "break demo::native::add_kernel", "-ex", "run", "-ex", "py-bt -p",
                  "--args", str(root / ".orch/toolchain/venv/bin/python"), str(two)]):
        out = subprocess.run(argv, env=hostile, cwd=root, capture_output=True, text=True,
                             timeout=120)
        text = out.stdout + out.stderr
        assert f"Python {two}:9:outer" in text and "Traceback" not in text, text
