"""builders/relink.py with real cmake, ninja, gcc and GNU ld: configured with
CMAKE_LINK_DEPENDS_NO_SHARED=ON, an edit of a function body relinks only the library it is
in, and what links that library is relinked exactly when its interface changed. After each
step, every linked file equals the same file of a fresh build of the same sources: an
incremental build never keeps stale bytes."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.builders import relink
from tests.linked_project import write_linked_recipe

CMAKE, NINJA = shutil.which("cmake"), shutil.which("ninja")
LISTS = """cmake_minimum_required(VERSION 3.18)
project(relinked C)
add_library(base SHARED base.c)
add_library(mid SHARED mid.c)
target_link_libraries(mid base)
add_executable(app app.c)
target_link_libraries(app mid base)
"""
BASE = "int base_value(void) { return %s; }\nint base_table[%d] = {1};\n"
MID = "int base_value(void);\nint mid_value(void) { return base_value() + 1; }\n"
APP = ("extern int base_table[];\nint mid_value(void);\n"
       "int main(void) { return mid_value() + base_table[0] == 43 ? 0 : 1; }\n")
OUTPUTS = ("libbase.so", "libmid.so", "app")


def write(src: Path, value: str = "41", table: int = 4, extra: str = "") -> None:
    """The tree, or (when it exists) an edit of base.c alone."""
    if not src.is_dir():
        src.mkdir(parents=True)
        (src / "CMakeLists.txt").write_text(LISTS)
        (src / "mid.c").write_text(MID)
        (src / "app.c").write_text(APP)
    (src / "base.c").write_text(BASE % (value, table) + extra)


def configure(src: Path, build: Path) -> None:
    assert CMAKE and NINJA, "cmake and ninja are part of the set-up"
    subprocess.run([CMAKE, "-S", src, "-B", build, "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={NINJA}",
                    "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_SKIP_BUILD_RPATH=ON",  # no path in a file
                    *(f"-D{k}={v}" for k, v in relink.NO_SHARED.items())],
                   check=True, capture_output=True)


def ninja(build: Path) -> None:
    subprocess.run([NINJA, "-C", build], check=True, capture_output=True, text=True)


def build(build_dir: Path) -> list[str]:
    """What compile_ does: ninja, then settle (ninja again for what it made stale)."""
    ninja(build_dir)
    return relink.settle(build_dir, lambda: ninja(build_dir))


def linked_now(build_dir: Path, since: int) -> set[str]:
    """The outputs ninja linked after .ninja_log's first `since` lines."""
    lines = (build_dir / ".ninja_log").read_text().splitlines()[since:]
    return {ln.split("\t")[3] for ln in lines if ln.split("\t")[3] in OUTPUTS}


def log_lines(build_dir: Path) -> int:
    return len((build_dir / ".ninja_log").read_text().splitlines())


def fresh_build(src: Path, tmp: Path) -> Path:
    fresh = tmp / f"fresh-{len(list(tmp.glob('fresh-*')))}"
    configure(src, fresh)
    ninja(fresh)
    return fresh


def assert_same_as_fresh(build_dir: Path, src: Path, tmp: Path) -> None:
    fresh = fresh_build(src, tmp)
    for out in OUTPUTS:
        assert (build_dir / out).read_bytes() == (fresh / out).read_bytes(), out


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    src, build_dir = tmp_path / "src", tmp_path / "build"
    write(src)
    configure(src, build_dir)
    assert build(build_dir) == []
    return src, build_dir


def test_the_link_graph_is_read_from_build_ninja(tree) -> None:
    _src, build_dir = tree
    shared, graph = relink.link_graph(build_dir)
    assert shared == {"libbase.so", "libmid.so"}
    assert graph == {"libbase.so": set(), "libmid.so": {"libbase.so"}, "app": {"libmid.so", "libbase.so"}}
    # NO_SHARED: the link edges no longer depend on the libraries' files
    text = (build_dir / "build.ninja").read_text()
    mid_edge = next(ln for ln in text.splitlines() if ln.startswith("build libmid.so:"))
    assert "| libbase.so" not in mid_edge.split("||")[0]


def test_an_edited_body_relinks_only_its_library(tree, tmp_path) -> None:
    src, build_dir = tree
    before = log_lines(build_dir)
    write(src, value="40 + 1")
    assert build(build_dir) == []
    assert linked_now(build_dir, before) == {"libbase.so"}  # CMake's own rule: all three
    assert_same_as_fresh(build_dir, src, tmp_path)
    assert subprocess.run([build_dir / "app"], env={"LD_LIBRARY_PATH": str(build_dir)}).returncode == 0


def test_a_changed_interface_relinks_what_links_the_library(tree, tmp_path) -> None:
    src, build_dir = tree
    # a data object's size: a copy relocation in app takes it, so app's bytes change
    before = log_lines(build_dir)
    write(src, table=8)
    assert build(build_dir) == ["app", "libmid.so"]
    assert linked_now(build_dir, before) == set(OUTPUTS)
    assert_same_as_fresh(build_dir, src, tmp_path)
    records = json.loads((build_dir / relink.RECORDS).read_text())
    assert sorted(records) == ["libbase.so", "libmid.so"]
    # a new export: relinked too (the link reads the library's symbols)
    before = log_lines(build_dir)
    write(src, table=8, extra="int base_more(void) { return 2; }\n")
    assert build(build_dir) == ["app", "libmid.so"]
    assert_same_as_fresh(build_dir, src, tmp_path)
    # nothing changed: nothing runs, nothing is stale
    before = log_lines(build_dir)
    assert build(build_dir) == [] and linked_now(build_dir, before) == set()


def test_a_removed_export_fails_the_build_as_a_fresh_build_would(tree, tmp_path) -> None:
    """Without the settle step ninja would keep libmid.so, linked against a base_value that
    is gone, and the failure would wait for the first import."""
    src, build_dir = tree
    (src / "base.c").write_text("int base_other(void) { return 1; }\nint base_table[4] = {1};\n")
    with pytest.raises(subprocess.CalledProcessError) as err:
        build(build_dir)
    assert "base_value" in err.value.stdout
    with pytest.raises(subprocess.CalledProcessError):
        fresh_build(src, tmp_path)


def test_a_run_killed_before_the_relink_relinks_next_time(tree, tmp_path) -> None:
    """The stale mark is the output's mtime (0), on disk before ninja runs again, and the
    records are written only once nothing is stale."""
    src, build_dir = tree
    write(src, table=8)
    ninja(build_dir)

    def killed() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        relink.settle(build_dir, killed)
    assert os.stat(build_dir / "libmid.so").st_mtime_ns == 0
    before = log_lines(build_dir)
    assert build(build_dir) == []  # ninja relinked both on its own: their mtime is 0
    assert linked_now(build_dir, before) == {"libmid.so", "app"}
    assert_same_as_fresh(build_dir, src, tmp_path)


def test_doit_build_relinks_only_the_edited_library(project, doit) -> None:
    """The cmake builder configures with NO_SHARED and settles after ninja: the second
    build's meta/ninja_log links libtwice.so only, and its main is the first build's."""
    src = write_linked_recipe(project, "relinked")
    arts = []
    for body in ("2 * x", "x + x"):
        (src / "twice.cpp").write_text(f"int twice(int x) {{ return {body}; }}\n")
        res = doit("build", "format=json", "recipe=relinked", "variant=release")
        assert res.returncode == 0, res.output[-3000:]
        arts.append(Path(json.loads(res.stdout.strip().splitlines()[-1])["path"]))
    steps = (arts[1] / "meta" / "ninja_log").read_text().splitlines()[1:]
    linked = {ln.split("\t")[3] for ln in steps if not ln.split("\t")[3].endswith(".o")}
    assert linked == {"libtwice.so"}, steps
    assert "-DCMAKE_LINK_DEPENDS_NO_SHARED=ON" in (arts[0] / "meta" / "build.log").read_text()
    main = [(a / "prefix" / "bin" / "main").read_bytes() for a in arts]
    assert main[0] == main[1]
    assert subprocess.run([arts[1] / "prefix" / "bin" / "main"]).returncode == 0
