"""An edited source whose mtime is older than the last build (`cp -p`, `tar x`, `rsync -a`,
a restore) is rebuilt: the build tree agrees with the content the artifact id hashes, not
only with ninja's clock (builders/source_mtimes). rebuild=1 exits 1 when its output differs
from the store. Real cmake/ninja/gcc builds of the demo."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from orchestrator.builders import source_mtimes


def artifacts(store: Path) -> set[Path]:
    return {p for p in (store / "store").iterdir() if p.is_dir()}


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def cp_p_with_old_mtime(path: Path, text: str, tmp: Path) -> None:
    """What `cp -p` of an edited copy made an hour ago does: new content, old mtime."""
    edited = tmp / path.name
    edited.write_text(text)
    hour_ago = time.time() - 3600
    os.utime(edited, (hour_ago, hour_ago))
    subprocess.run(["cp", "-p", str(edited), str(path)], check=True)
    assert path.stat().st_mtime < time.time() - 3000


def test_an_edit_with_an_old_mtime_is_rebuilt(project, doit, store, tmp_path):
    first = doit("build", "variant=release", "format=json")
    assert first.returncode == 0, first.output
    old = last_json(first.stdout)["path"]
    core = project / "recipes/demo/core/core.cpp"
    cp_p_with_old_mtime(core, core.read_text() + '\nextern "C" __attribute__((visibility('
                        '"default"))) const char* demo_marker_29() { return "marker-29"; }\n',
                        tmp_path)
    second = doit("build", "variant=release", "format=json")
    assert second.returncode == 0, second.output
    new = last_json(second.stdout)["path"]
    assert new != old                                      # the id hashes the content
    lib = (Path(new) / "prefix/lib/libdemo_core.so").read_bytes()
    assert b"demo_marker_29" in lib and b"marker-29" in lib, "stale libdemo_core.so"
    assert "changed under an older mtime (first: core/core.cpp)" in second.stderr
    again = doit("build", "variant=release", "rebuild=1")  # the store entry is the clean build
    assert again.returncode == 0, again.output
    assert "identical to the store" in again.output


def test_rebuild_exits_1_when_the_output_differs(project, doit, store, tmp_path):
    """A build that reads a file outside its source (not in its id) gives other bytes when
    that file changes: rebuild=1 says so and exits 1, the store entry is untouched."""
    outside = tmp_path / "outside.h"
    outside.write_text('#define DEMO_OUTSIDE "one"\n')
    core = project / "recipes/demo/core/core.cpp"
    core.write_text(f'#include "{outside}"\n' + core.read_text() + '\nextern "C" __attribute__'
                    '((visibility("default"))) const char* demo_outside() { return DEMO_OUTSIDE; }\n')
    built = doit("build", "variant=release")
    assert built.returncode == 0, built.output
    [art] = artifacts(store)
    manifest = (art / "manifest.json").read_bytes()
    outside.write_text('#define DEMO_OUTSIDE "two"\n')
    res = doit("build", "variant=release", "rebuild=1")
    assert res.returncode == 1, res.output
    assert "different prefix/lib/libdemo_core.so" in res.output
    assert "Traceback" not in res.output
    assert artifacts(store) == {art} and (art / "manifest.json").read_bytes() == manifest


def test_a_recopy_with_kept_mtimes_touches_only_changed_content(tmp_path):
    """A pinned source's per-build copy is made again with `cp -a` (every inode new, mtimes
    kept): only a file whose content changed is touched, so ninja rebuilds only that."""
    src, build = tmp_path / "src", tmp_path / "build"
    (src / "sub").mkdir(parents=True)
    build.mkdir()
    (src / "a.cpp").write_text("int a;\n")
    (src / "sub/b.h").write_text("int b;\n")
    (src / "build").mkdir()
    (src / "build/out.o").write_text("not source\n")
    hour_ago = time.time() - 3600
    for f in (src / "a.cpp", src / "sub/b.h"):
        os.utime(f, (hour_ago, hour_ago))
    assert source_mtimes.agree(src, build) == []          # no record yet: a new tree
    source_mtimes.record(src, build)
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", f"{src}/.", str(copy)], check=True)
    (copy / "sub/b.h").write_text("int b2;\n")
    os.utime(copy / "sub/b.h", (hour_ago, hour_ago))
    shutil.rmtree(src)
    os.rename(copy, src)
    before = (src / "a.cpp").stat().st_mtime_ns
    assert source_mtimes.agree(src, build) == ["sub/b.h"]
    assert (src / "a.cpp").stat().st_mtime_ns == before   # same content: left as it was
    assert (src / "sub/b.h").stat().st_mtime > time.time() - 60
    source_mtimes.record(src, build)
    assert source_mtimes.agree(src, build) == []          # recorded: nothing left to touch
    (src / "a.cpp").write_text("int a2;\n")                # an ordinary edit: a new mtime
    assert source_mtimes.agree(src, build) == []          # ninja sees it itself


def test_a_pep517_cmake_tree_rebuilds_an_edit_with_an_old_mtime(project, doit, store, tmp_path):
    """scikit-build-core keeps its cmake tree (<build tree>/cmake) across builds of a fresh
    source copy made with the mtimes kept: the same agreement holds there."""
    first = doit("build", "recipe=skbext", "variant=release", "format=json")
    assert first.returncode == 0, first.output
    src = project / "recipes/skbext/csrc/core.c"
    cp_p_with_old_mtime(src, src.read_text() + '\n__attribute__((visibility("default"))) '
                        'const char* skbext_marker_29(void) { return "marker-29"; }\n', tmp_path)
    second = doit("build", "recipe=skbext", "variant=release", "format=json")
    assert second.returncode == 0, second.output
    new = Path(last_json(second.stdout)["path"])
    so = next(new.glob("prefix/python/skbext/_core*.so")).read_bytes()
    assert b"skbext_marker_29" in so, "stale _core.so"
