"""benchmarks/pytorch_edit_loop.py's readings, on fixtures: the steps one ninja run appended to a
tree's .ninja_log (recompile, links, the rest), doit's phase lines, and the edit it makes in
TORCH_IMPL_FUNC(sub_out). No build here: the benchmark itself runs on the whole tree."""
from __future__ import annotations

import sys

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from pytorch_checkout import appended_steps, phases  # noqa: E402
from pytorch_edit_loop import (  # noqa: E402
    ANCHOR,
    EDITED,
    OBJECT,
    cmake_default_relinks,
    edit,
    edited_line,
    links_of,
    split_steps,
)

HEADER = "# ninja log v5\n"
EARLIER = "0\t61000\t1\tcaffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native/Copy.cpp.o\tabc\n"
RUN = (f"10\t95010\t2\t{OBJECT}\t1f\n"
       "95020\t155020\t3\tlib/libtorch_cpu.so\t2f\n"
       "155030\t158030\t4\tlib/libtorch.so\t3f\n"
       "158040\t158540\t5\taten/src/ATen/Functions.h\t4f\n"
       "158040\t158540\t5\taten/src/ATen/Functions.cpp\t4f\n")


def test_the_steps_a_run_appended_split_into_recompile_link_and_the_rest(tmp_path):
    log = tmp_path / ".ninja_log"
    log.write_text(HEADER + EARLIER)
    offset = log.stat().st_size
    log.write_text(HEADER + EARLIER + RUN)
    steps = appended_steps(log, offset)
    assert steps[0] == ([OBJECT], 95.0) and len(steps) == 4  # the codegen's two outputs: one step
    assert steps[3] == (["aten/src/ATen/Functions.h", "aten/src/ATen/Functions.cpp"], 0.5)
    assert split_steps(steps) == {"recompile": 95.0, "link": 63.0, "other ninja steps": 0.5}
    assert links_of(steps) == ["libtorch.so", "libtorch_cpu.so"]
    # ninja recompacted its log (now shorter than the offset): every entry is this run's
    log.write_text(HEADER + RUN)
    assert len(appended_steps(log, offset + 10_000)) == 4
    # a new tree (offset 0): the header is not a step
    assert appended_steps(log, 0) == appended_steps(log, offset + 10_000)


def test_phase_lines_summed_by_name():
    err = ("✓ build          96.2s\n✓ install caffe2     1.5s  some note\n"
           "✓ install c10     0.5s\n✓ torch._C     0.3s\n✓ verify      4.0s\n✓ commit   2.1s\n"
           "✓ build      1.0s\n")
    got = phases(err)
    assert got == {"build": 97.2, "install caffe2": 1.5, "install c10": 0.5, "torch._C": 0.3,
                   "verify": 4.0, "commit": 2.1}


def test_each_edit_replaces_the_last_one_in_sub_outs_body(tmp_path):
    path = tmp_path / "BinaryOps.cpp"
    body = "  add_stub(device_type(), *this, -alpha);\n}\n"
    path.write_text("// head\n" + ANCHOR + body)
    path.chmod(0o444)  # a read-only copy is replaced, not written
    edit(path, "1a")
    edit(path, "1b")
    text = path.read_text()
    assert "orch_edit_1a" not in text and text.count("orch_edit_1b") == 3
    assert text.index(ANCHOR) < text.index("orch_edit_1b") < text.index("add_stub")
    assert text.replace("  { static volatile int orch_edit_1b = 0; orch_edit_1b = orch_edit_1b + 1; }\n",
                        "") == "// head\n" + ANCHOR + body
    assert EDITED.endswith("BinaryOps.cpp")
    # the line the debugger's breakpoint goes on: the statement itself, after the anchor
    assert edited_line(path) == 1 + ANCHOR.count("\n") + 1
    assert "orch_edit_1b" in text.splitlines()[edited_line(path) - 1]


def test_a_tree_without_the_function_is_one_line(tmp_path):
    path = tmp_path / "BinaryOps.cpp"
    path.write_text("// another version\n")
    with pytest.raises(SystemExit, match=r"TORCH_IMPL_FUNC\(sub_out\) not found"):
        edit(path, "x")
    assert path.read_text() == "// another version\n"


def test_upstreams_relinks_are_made_in_a_tree_configured_without_them(tmp_path):
    """The shared build tree has CMAKE_LINK_DEPENDS_NO_SHARED (builders/relink.py); the
    upstream side marks what CMake's default rule relinks after libbase.so, transitively, and
    its one ninja run relinks them. A real cmake + ninja tree of three links."""
    import os
    import shutil
    import subprocess

    src, build = tmp_path / "src", tmp_path / "build"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(p C)\nadd_library(base SHARED base.c)\n"
        "add_library(mid SHARED mid.c)\ntarget_link_libraries(mid base)\n"
        "add_library(top SHARED top.c)\ntarget_link_libraries(top mid)\n"
        "add_library(alone SHARED alone.c)\n")
    for name, body in (("base", "int b(void){return 1;}"), ("mid", "int b(void); int m(void){return b();}"),
                       ("top", "int m(void); int t(void){return m();}"), ("alone", "int a(void){return 0;}")):
        (src / f"{name}.c").write_text(body + "\n")
    ninja = shutil.which("ninja")
    subprocess.run(["cmake", "-S", src, "-B", build, "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}",
                    "-DCMAKE_LINK_DEPENDS_NO_SHARED=ON"], check=True, capture_output=True)
    subprocess.run([ninja, "-C", build], check=True, capture_output=True)
    assert cmake_default_relinks(build, "libbase.so") == ["libmid.so", "libtop.so"]
    assert os.stat(build / "libtop.so").st_mtime_ns == 0
    before = (build / ".ninja_log").stat().st_size
    subprocess.run([ninja, "-C", build], check=True, capture_output=True)
    assert links_of(appended_steps(build / ".ninja_log", before)) == ["libmid.so", "libtop.so"]
