"""A shared library with no code of its own (PyTorch's libtorch.so and libtorch_global_deps.so:
one empty source file, they only pull in their DT_NEEDED) has no DWARF even at -g, and the
debug-info check must not fail a relwithdebinfo artifact for it: found by the first full
PyTorch build. A library that does define functions still needs its DWARF."""
from __future__ import annotations

import subprocess
from pathlib import Path

from orchestrator.verify.engine import verify_tree
from orchestrator.verify.inputs import VerifyConfig
from orchestrator.verify.resolve import SearchConfig


def gcc(out: Path, src: str, *flags: str) -> Path:
    c = out.with_suffix(".c")
    c.write_text(src)
    subprocess.run(["gcc", "-shared", "-fPIC", *flags, "-o", str(out), str(c)], check=True)
    c.unlink()
    return out


def debug_findings(root: Path) -> dict[str, tuple[str, str]]:
    cfg = VerifyConfig(artifact=root.name, root=root, prefix=root, search=SearchConfig(),
                       build_type="RelWithDebInfo", variant="relwithdebinfo")
    return {f.file: (f.severity, f.cause) for f in verify_tree(cfg).findings
            if f.check == "debug_info"}


def test_a_library_exporting_nothing_needs_no_dwarf_one_with_code_does(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    gcc(lib / "libumbrella.so", "", "-g", "-O2")             # as torch/csrc/empty.c
    gcc(lib / "libcode.so", "int f(int x){return x*2;}\n", "-O2")  # code, but no -g
    gcc(lib / "libgood.so", "int g(int x){return x+1;}\n", "-g", "-O2")
    found = debug_findings(tmp_path)
    assert found["lib/libumbrella.so"][0] == "info", found
    assert "exports no definitions" in found["lib/libumbrella.so"][1]
    assert found["lib/libcode.so"][0] == "fail", found
    assert "expects DWARF" in found["lib/libcode.so"][1]
    assert "lib/libgood.so" not in found, found


def test_doit_vscode_note_leaves_code_free_libraries_out(tmp_path: Path) -> None:
    from orchestrator.ide.debug_info import debug_info_note, debug_info_report
    lib = tmp_path / "prefix" / "lib"
    lib.mkdir(parents=True)
    gcc(lib / "libumbrella.so", "", "-g", "-O2")
    gcc(lib / "libgood.so", "int g(int x){return x+1;}\n", "-g", "-O2")
    report = debug_info_report(tmp_path)
    assert report == {"prefix/lib/libgood.so": True}, report
    assert "DWARF line tables in all 1 libraries" in debug_info_note("relwithdebinfo", report)
    gcc(lib / "libcode.so", "int f(int x){return x*2;}\n", "-O2")
    assert debug_info_report(tmp_path)["prefix/lib/libcode.so"] is False
