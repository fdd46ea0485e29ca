"""A variant's `split_dwarf = true` (builders/split_dwarf.py) with real cmake, ninja, gcc,
ccache and the pinned lldb-14: the libraries keep skeleton units (their links write a
fraction of the DWARF), every unit's .dwo is in the artifact beside its library, and the
debugger reads a kernel's variables from it with the build tree's copies gone. A .dwo missing
from an artifact fails verify, naming it."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.errors import UserError
from orchestrator.model.recipe import load_recipe
from orchestrator.realise.build_step import epoch_of
from orchestrator.store.stage_record import read_record
from orchestrator.verify.dwarf import debug_facts, skeleton_units
from orchestrator.verify.elf import read_elf
from tests.conftest import REPO, copy_project, run_doit

# recipes/demo.toml with split DWARF on its relwithdebinfo variant (the flags lldb-14 needs
# stay; release and debug as they are).
_RWDI_FLAGS = 'cflags = ["-gdwarf-4", "-fno-reorder-blocks-and-partition"]\n'
_DEMO = (REPO / "recipes" / "demo.toml").read_text()
assert _DEMO.count(_RWDI_FLAGS) == 1, "recipes/demo.toml's relwithdebinfo flags changed"
SPLIT = _DEMO.replace(_RWDI_FLAGS, _RWDI_FLAGS + "split_dwarf = true\n")
SCRIPT = "import demo\nprint(demo.add([1.0, 2.0], [10.0, 20.0], alpha=2.5))\n"


def debug_info_size(lib: Path) -> int:
    info = read_elf(lib, symbols=False)
    try:
        return info.sections[".debug_info"][1]
    finally:
        info.close()


def built(doit, recipe: str) -> Path:
    res = doit("build", "format=json", f"recipe={recipe}", "variant=relwithdebinfo")
    assert res.returncode == 0, res.output[-4000:]
    return Path(json.loads(res.stdout.strip().splitlines()[-1])["path"])


def test_the_artifact_carries_each_units_dwo_and_lldb_reads_it(project, doit, store, tmp_path) -> None:
    (project / "recipes" / "demosplit.toml").write_text(SPLIT)
    art, whole = built(doit, "demosplit"), built(doit, "demo")
    lib = art / "prefix" / "lib" / "libdemo_ops.so"
    info = read_elf(lib, symbols=False)
    try:
        units = skeleton_units(lib, info)
        facts = debug_facts(lib, info)
    finally:
        info.close()
    # Every unit a skeleton naming its .dwo under the library's own .dwo/, and there.
    assert units and {comp for comp, _ in units} == {".dwo"}, units
    assert sorted(name for _, name in units) == ["CMakeFiles/demo_ops.dir/ops/add_kernel.cpp.dwo",
                                                 "CMakeFiles/demo_ops.dir/ops/registry.cpp.dwo"]
    assert facts.missing_dwo == () and len(facts.dwo_files) == 2
    assert all((lib.parent / ".dwo" / name).is_file() for _, name in units)
    # The variant's flags, read from the .dwo (verify's check reads the same).
    assert any("-gsplit-dwarf" in p and "-O2" in p for p in facts.producers), facts.producers
    ext = next((art / "prefix" / "python" / "demo").glob("_C*.so"))
    assert (ext.parent / ".dwo" / "CMakeFiles/_C.dir/csrc/module.cpp.dwo").is_file()
    # What the link copies: the skeletons, a fraction of the whole DWARF.
    split, full = debug_info_size(lib), debug_info_size(whole / "prefix" / "lib" / "libdemo_ops.so")
    assert split * 10 < full, (split, full)

    # The build tree's .dwo files gone: lldb reads the artifact's, through the workspace.
    for dwo in (p for p in (store / "build").rglob("*.dwo") if p.is_file()):
        dwo.unlink()
    ws = copy_project(tmp_path / "ws")
    shutil.copy2(project / "recipes" / "demosplit.toml", ws / "recipes")
    for args in (("switch", "recipe=demosplit", "variant=relwithdebinfo", "substitute=0"), ("vscode",)):
        res = run_doit(ws, *args, f"store={store}")
        assert res.returncode == 0, res.output[-3000:]
    (ws / "call_add.py").write_text(SCRIPT)
    out = subprocess.run(
        [str(ws / ".orch/bin/lldb"), "-b", "-S", str(ws / ".lldbinit"),
         "-o", "breakpoint set -n demo::native::add_kernel", "-o", "run",
         "-o", "frame variable alpha", "-o", "frame variable self",
         "--", str(ws / ".orch/toolchain/venv/bin/python"), str(ws / "call_add.py")],
        cwd=ws, capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    assert re.search(r"frame #0: .*add_kernel\(.*\) at add_kernel\.cpp:\d+", text), text
    assert "(double) alpha = 2.5" in text, text
    assert re.search(r"\(const demo::Tensor &\) self = 0x[0-9a-f]+", text), text
    # gdb too, with the generated .gdbinit (the add_kernel@plt stub stops first: go on).
    skip_plt = ('python (gdb.execute("continue") '
                'if gdb.selected_frame().find_sal().symtab is None else None)')
    out = subprocess.run(
        ["gdb", "-batch", "-nx", "-x", str(ws / ".gdbinit"), "-ex", "break demo::native::add_kernel",
         "-ex", "run", "-ex", skip_plt, "-ex", "print alpha", "-ex", "print self.numel()",
         "--args", str(ws / ".orch/toolchain/venv/bin/python"), str(ws / "call_add.py")],
        cwd=ws, capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    assert re.search(r"add_kernel \(self=.*\) at /orch/src/demosplit/ops/add_kernel\.cpp:\d+", text), text
    assert re.search(r"\$1 = 2\.5\b", text), text

    # A .dwo missing from a copy of the artifact: verify fails, naming the library and the file.
    copy = tmp_path / "copy"
    shutil.copytree(art / "prefix", copy / "prefix", symlinks=True)
    (copy / "prefix" / "lib" / ".dwo" / "CMakeFiles/demo_ops.dir/ops/add_kernel.cpp.dwo").unlink()
    info = read_elf(copy / "prefix" / "lib" / "libdemo_ops.so", symbols=False)
    try:
        facts = debug_facts(copy / "prefix" / "lib" / "libdemo_ops.so", info)
    finally:
        info.close()
    assert [Path(m).name for m in facts.missing_dwo] == ["add_kernel.cpp.dwo"]


def test_a_dwo_missing_from_an_artifact_fails_verify(project, doit, store) -> None:
    """The store's copy is read-only: the check reads what `doit verify` reads, an artifact
    whose library names a .dwo it does not carry (built without its placement)."""
    (project / "recipes" / "demosplit.toml").write_text(SPLIT)
    art = built(doit, "demosplit")
    dwo = art / "prefix" / "lib" / ".dwo" / "CMakeFiles/demo_ops.dir/ops/add_kernel.cpp.dwo"
    parent = dwo.parent
    parent.chmod(0o755)
    try:
        moved = dwo.with_name("moved")
        dwo.rename(moved)
        res = doit("verify", "recipe=demosplit", "variant=relwithdebinfo", "format=json")
    finally:
        moved.rename(dwo)
        parent.chmod(0o555)
    assert res.returncode == 1, res.output[-3000:]
    report = json.loads(res.stdout)
    causes = [f["cause"] for f in report["findings"] if f["check"] == "debug_info"
              and f["severity"] == "fail"]
    assert any("lib/libdemo_ops.so" in c and "lib/.dwo/CMakeFiles/demo_ops.dir/ops/add_kernel.cpp.dwo" in c
               for c in causes), causes


@pytest.mark.parametrize(("extra", "message"), [
    ('[variants.releasesplit]\nbuild_type = "Release"\nsplit_dwarf = true\n',
     "split_dwarf needs a build type with debug info"),
])
def test_split_dwarf_on_a_variant_without_debug_info_is_one_line(tmp_path, extra, message) -> None:
    (tmp_path / "bad.toml").write_text(SPLIT + extra)
    with pytest.raises(UserError, match=message):
        load_recipe(tmp_path, "bad")


def test_split_dwarf_outside_cmake_is_one_line(tmp_path) -> None:
    (tmp_path / "wheel.toml").write_text(SPLIT.replace('system = "cmake"', 'system = "setuptools"'))
    with pytest.raises(UserError, match='split_dwarf needs build.system "cmake" or "pytorch"'):
        load_recipe(tmp_path, "wheel")


def test_an_edit_copies_only_its_units_dwo(project, doit, store) -> None:
    """The second build after an edit of add_kernel.cpp: its .dwo is new, every other .dwo is
    the first artifact's committed inode (BuildContext.keep_copy and the stage record)."""
    (project / "recipes" / "demosplit.toml").write_text(SPLIT)
    first = built(doit, "demosplit")
    kernel = project / "recipes" / "demo" / "ops" / "add_kernel.cpp"
    kernel.write_text(kernel.read_text().replace("const int64_t n = self.numel();",
                                                 "const int64_t n = self.numel();\n  (void)0;"))
    second = built(doit, "demosplit")
    assert first != second

    def dwo_inodes(art: Path) -> dict[str, int]:
        return {p.relative_to(art).as_posix(): p.stat().st_ino
                for p in (art / "prefix").rglob("*.dwo") if p.is_file()}

    a, b = dwo_inodes(first), dwo_inodes(second)
    assert set(a) == set(b) and len(a) == 4, (a, b)
    changed = sorted(k for k in a if a[k] != b[k])
    assert changed == ["prefix/lib/.dwo/CMakeFiles/demo_ops.dir/ops/add_kernel.cpp.dwo"], changed
    # Linked before the commit, not copied and hashed again: the build tree's stage record,
    # which the next build's copies are looked up in, holds every .dwo copy.
    [tree] = [d for d in (store / "build").iterdir() if d.name.startswith("demosplit-")]
    epoch = epoch_of(tree)
    assert epoch is not None
    recorded = read_record(store, tree, epoch[0])
    assert {k.removeprefix("prefix/") for k in recorded if k.endswith(".dwo")} == \
        {k.removeprefix("prefix/") for k in b}, sorted(recorded)
