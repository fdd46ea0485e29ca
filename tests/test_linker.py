"""`[build] linker = "mold"`: the lock's mold (a Debian package unpacked into the toolchain,
like ccache) links a cmake recipe's libraries and programs through gcc's -B, with real
cmake, ninja, gcc and mold; the choice is part of the id, a recipe without it keeps its id,
and a recipe that asks for it without locking it gets one line and exit 2
(tests/test_bad_input_classes.py)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from orchestrator.model.recipe import BuildSpec
from tests.linked_project import write_linked_recipe

DEFAULT_CMAKE_USES = '["python", "compiler:cc", "compiler:cxx", "pypi:cmake", "pypi:ninja"]'
MOLD_USES = DEFAULT_CMAKE_USES[:-1] + ', "deb:mold"]'


def _comment(path: Path) -> str:
    return subprocess.run(["readelf", "-p", ".comment", str(path)], capture_output=True,
                          text=True, check=True).stdout


def test_a_cmake_recipe_links_with_the_locked_mold(project, doit) -> None:
    write_linked_recipe(project, "withmold", f'linker = "mold"\nuses = {MOLD_USES}')
    write_linked_recipe(project, "withld", f"uses = {DEFAULT_CMAKE_USES}")
    arts = {}
    for name in ("withmold", "withld"):
        res = doit("build", "format=json", f"recipe={name}", "variant=release")
        assert res.returncode == 0, res.output[-3000:]
        arts[name] = json.loads(res.stdout.strip().splitlines()[-1])
    mold, ld = (Path(arts[n]["path"]) / "prefix" for n in ("withmold", "withld"))
    for prefix in (mold, ld):
        assert subprocess.run([str(prefix / "bin" / "main")]).returncode == 0
    assert "mold 1.10.1" in _comment(mold / "lib" / "libtwice.so")
    assert "mold 1.10.1" in _comment(mold / "bin" / "main")
    assert "mold" not in _comment(ld / "lib" / "libtwice.so")
    assert arts["withmold"]["id"] != arts["withld"]["id"]


def test_a_recipe_without_a_linker_keeps_its_id() -> None:
    """The field is left out of the build section's dump (hence of the derivation) unset."""
    plain = BuildSpec(system="cmake").model_dump(mode="json")
    assert "linker" not in plain
    with_mold = BuildSpec(system="cmake", linker="mold", uses=["deb:mold"]).model_dump(mode="json")
    assert with_mold["linker"] == "mold"


def _gdb_index_in_use(lib: Path) -> bool:
    out = subprocess.run(["gdb", "-nx", "-batch", "-ex", f"file {lib}", "-ex",
                          "maint print objfiles"], capture_output=True, text=True).stdout
    return ".gdb_index: version" in out


def test_mold_writes_the_gdb_index_gdb_reads_with_gnu_pubnames(project, doit) -> None:
    """docs/debugging.md's recipe for gdb users: with mold, `-ggnu-pubnames` in a debug
    variant's cflags and `-Wl,--gdb-index` in its LDFLAGS put a .gdb_index in each linked
    file, which gdb uses instead of indexing the DWARF itself at every first start (or after
    a pull). Without the pubnames mold writes an index without names, which gdb passes over."""
    lldb14 = '"-gdwarf-4", "-fno-reorder-blocks-and-partition"'
    for name, cflags in (("indexed", f'[{lldb14}, "-ggnu-pubnames"]'), ("nonames", f"[{lldb14}]")):
        write_linked_recipe(project, name, f'linker = "mold"\nuses = {MOLD_USES}')
        toml = project / "recipes" / f"{name}.toml"
        toml.write_text(toml.read_text() + (
            f'[variants.relwithdebinfo]\nbuild_type = "RelWithDebInfo"\ncflags = {cflags}\n'
            '[variants.relwithdebinfo.env]\nLDFLAGS = "-Wl,--gdb-index"\n'))
    libs = {}
    for name in ("indexed", "nonames"):
        res = doit("build", "format=json", f"recipe={name}", "variant=relwithdebinfo")
        assert res.returncode == 0, res.output[-3000:]
        libs[name] = Path(json.loads(res.stdout.strip().splitlines()[-1])["path"]) / \
            "prefix" / "lib" / "libtwice.so"
    for lib in libs.values():
        sections = subprocess.run(["readelf", "-S", "-W", str(lib)], capture_output=True,
                                  text=True, check=True).stdout
        assert ".gdb_index" in sections, sections
    assert _gdb_index_in_use(libs["indexed"])
    assert not _gdb_index_in_use(libs["nonames"])
