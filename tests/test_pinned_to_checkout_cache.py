"""The compile cache carries from a pinned PyTorch tree (built from its copy in the build tree)
to a `source=PATH` checkout of the same tree (built in place), with the right debug paths
(issue 33): both are compiled through `<build tree>/source` (the copy, or a link to the
checkout), so their compile lines agree and the checkout's build is all hits; both map
`source` to `/orch/src/<recipe>`, so the objects a hit hands over name the checkout's logical
root, not the pinned build tree's. On a PyTorch-shaped miniature (recipes/pytorch/minitorch,
real cmake/ninja/gcc/ccache, seconds); tests/test_pytorch_build.py does the same on c10 of the
real tree, with lldb."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from conftest import copy_project, run_doit
from elftools.elf.elffile import ELFFile
from test_pytorch2_checkout import MINI, tar_dir

SUMMARY = re.compile(r"compile cache: (\d+) hit\(s\), (\d+) miss\(es\)")


def minitorch_project(tmp_path: Path) -> tuple[Path, Path]:
    tree = tmp_path / "tree"  # a 2.x-shaped tree: what the builder takes as a checkout too
    shutil.copytree(MINI, tree, ignore=shutil.ignore_patterns("__pycache__"))
    (tree / "version.txt").write_text("2.6.0\n")
    archives = tmp_path / "archives"
    archives.mkdir()
    sha = tar_dir(tree, archives / "minitorch-2.6.0.tar.gz", "minitorch-2.6.0")
    project = copy_project(tmp_path / "project")
    (project / "recipes" / "minicc.toml").write_text(f"""
lock = "pytorch"
[source]
kind = "archive"
file = "minitorch-2.6.0.tar.gz"
sha256 = "{sha}"
[build]
system = "pytorch"
[build.pytorch]
version = "2.6.0"
python_extension = false
[variants.relwithdebinfo]
build_type = "RelWithDebInfo"
cflags = ["-gdwarf-4", "-fno-reorder-blocks-and-partition"]
""")
    return project, archives


def dwarf_sources(lib: Path) -> set[str]:
    """Each compile unit's source as DWARF names it (DW_AT_name after DW_AT_comp_dir)."""
    names = set()
    with open(lib, "rb") as f:
        for cu in ELFFile(f).get_dwarf_info().iter_CUs():
            top = cu.get_top_DIE().attributes
            name = top["DW_AT_name"].value.decode()
            if not name.startswith("/"):
                name = f"{top['DW_AT_comp_dir'].value.decode()}/{name}"
            names.add(name)
    return names


def test_pinned_tree_then_its_checkout_hits_with_the_checkouts_debug_paths(tmp_path):
    project, archives = minitorch_project(tmp_path)
    checkout = tmp_path / "checkout"
    shutil.copytree(tmp_path / "tree", checkout)

    def build(*args: str) -> tuple[int, int, Path]:
        res = run_doit(project, "build", "format=json", "recipe=minicc", "variant=relwithdebinfo",
                       "substitute=0", f"store={tmp_path / 'store'}", *args,
                       env={"ORCH_ARCHIVES": str(archives), "ORCH_NO_PROGRESS": "1"})
        assert res.returncode == 0, res.output[-3000:]
        m = SUMMARY.search(res.output)
        assert m, res.output
        return int(m[1]), int(m[2]), Path(json.loads(res.stdout.strip().splitlines()[-1])["path"])

    hits, misses, pinned = build()
    assert misses >= 2 and hits == 0, (hits, misses)  # c10 and torch_python, cold
    manifest = json.loads((pinned / "manifest.json").read_text())
    assert manifest["prefix_map"] == {"/orch/src/minicc": "source",
                                      "/orch/build/minicc-relwithdebinfo": "build"}
    # The debugger of the pinned artifact: /orch/src/minicc is mapped to the pinned tree.
    store_env = {"ORCH_ARCHIVES": str(archives), "ORCH_NO_PROGRESS": "1"}
    for verb, *extra in (("switch", "substitute=0"), ("vscode",)):
        res = run_doit(project, verb, "recipe=minicc", "variant=relwithdebinfo", *extra,
                       f"store={tmp_path / 'store'}", env=store_env)
        assert res.returncode == 0, res.output[-3000:]
    out = subprocess.run([str(project / ".orch/bin/lldb"), "-b", "-S", str(project / ".lldbinit"),
                          "-o", f"target create {pinned / 'prefix/lib/libc10.so'}",
                          "-o", "source list -n c10::build_type"],
                         capture_output=True, text=True, timeout=300)
    assert "return MINITORCH_BUILD_TYPE;" in out.stdout, out.stdout[-3000:] + out.stderr[-2000:]
    assert "File: /orch/src/minicc/c10/build_info.cpp" in out.stdout, out.stdout[-3000:]

    hits, co_misses, from_checkout = build(f"source={checkout}")
    print(f"checkout of the pinned tree: {hits} of {hits + co_misses} compiles from the pinned entries")
    assert (hits, co_misses) == (misses, 0)
    for lib in ("libc10.so", "libtorch_python.so"):
        names = dwarf_sources(pinned / "prefix/lib" / lib)
        assert names == dwarf_sources(from_checkout / "prefix/lib" / lib), lib
        assert {n for n in names if "/orch/" in n} <= {"/orch/src/minicc/c10/build_info.cpp",
                                                        "/orch/src/minicc/torch/csrc/module.cpp"}, names
        assert names & {"/orch/src/minicc/c10/build_info.cpp", "/orch/src/minicc/torch/csrc/module.cpp"}
        data = (from_checkout / "prefix/lib" / lib).read_bytes()
        assert b"/orch/build/minicc-relwithdebinfo/source" not in data and str(tmp_path).encode() not in data

    # A checkout's tree configured through `.orch-src` (the link's name before) is configured
    # afresh from `source`: cmake would accept the same CMakeLists.txt through another link
    # but keep the old CMAKE_HOME_DIRECTORY, which its own re-runs then use.
    [tree] = [t for t in (tmp_path / "store" / "build").iterdir() if (t / "source").is_symlink()]
    (tree / ".orch-src").symlink_to(checkout)
    cache = tree / "CMakeCache.txt"
    home = f"CMAKE_HOME_DIRECTORY:INTERNAL={tree}/source"
    assert home in cache.read_text()
    cache.write_text(cache.read_text().replace(home, f"CMAKE_HOME_DIRECTORY:INTERNAL={tree}/.orch-src"))
    (tree / ".orch-configure.json").unlink()  # as a changed configure line would
    cpp = checkout / "c10/build_info.cpp"
    cpp.write_text(cpp.read_text() + "// edited\n")
    build(f"source={checkout}")
    assert home in cache.read_text()
