"""benchmarks/pytorch_edit_loop.py's readings, on fixtures: the steps one ninja run appended to a
tree's .ninja_log (recompile, links, the rest), doit's phase lines, and the edit it makes in
TORCH_IMPL_FUNC(sub_out). No build here: the benchmark itself runs on the whole tree."""
from __future__ import annotations

import sys

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from pytorch_checkout import appended_steps, phases  # noqa: E402
from pytorch_edit_loop import ANCHOR, EDITED, OBJECT, edit, edited_line, links_of, split_steps  # noqa: E402

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
