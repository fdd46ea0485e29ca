"""An incremental build's commit reads only what changed (Store.reuse_unchanged): real demo
builds (cmake, ninja, gcc), run in this process so that every file the build hashes is seen."""
from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from orchestrator import hashing
from orchestrator.builders import context, install_map
from orchestrator.builders.pytorch_meta import link_compile_commands_into_meta
from orchestrator.config.settings import Settings
from orchestrator.hashing import sha256_file
from orchestrator.memo.file_reads import stat_sig
from orchestrator.realise import build_step
from orchestrator.realise.pipeline import realise
from orchestrator.store import artifacts as store_module
from orchestrator.store.artifacts import Store
from orchestrator.store.stage_record import STAGE_RECORD
from orchestrator.verify import cache as verify_cache

UNCHANGED = ["prefix/lib/libdemo_core.so", "prefix/include/demo/core.h",
             "prefix/include/demo/ops.h", "prefix/python/demo/__init__.py"]


@pytest.fixture
def build(project: Path, store: Path, monkeypatch: pytest.MonkeyPatch):
    """build() -> (artifact dir, staged paths that were read to hash them)."""
    def run() -> tuple[Path, set[str]]:
        read: set[str] = set()

        def counting(path: Path | str) -> str:
            p = Path(path)
            if "/tmp/" in p.as_posix() and ".tmp-" in p.as_posix():  # a staged file
                read.add(p.as_posix().split(".tmp-", 1)[1].split("/", 1)[1])
            return sha256_file(p)

        monkeypatch.setattr(hashing, "sha256_file", counting)
        monkeypatch.setattr(verify_cache, "sha256_file", counting)
        settings = Settings.from_vars(project, {"store": str(store), "substitute": "0"})
        path = realise(settings, Store(store)).path
        monkeypatch.undo()
        return path, read
    return run


def edit_kernel(project: Path, n: int) -> None:
    kernel = project / "recipes/demo/ops/add_kernel.cpp"
    kernel.write_text(f"// edit {n}\n" + kernel.read_text())


def manifest_matches_content(art: Path) -> None:
    manifest = Store.read_manifest(art)
    for f in manifest.files:
        if f.kind == "file":
            assert sha256_file(art / f.path) == f.sha256, f.path


def test_an_edited_cpp_rehashes_only_what_changed(project, store, build):
    first, read = build()
    assert set(UNCHANGED) <= read  # nothing recorded yet: everything is hashed
    edit_kernel(project, 1)
    second, read = build()
    assert second != first
    assert "prefix/lib/libdemo_ops.so" in read       # ninja relinked it
    assert not read & set(UNCHANGED), read           # copies of unchanged files: not read
    # ... nor the build tree's files the builder copied into meta/ (BuildContext.copies)
    assert not read & {"meta/CMakeCache.txt", "meta/compile_commands.json"}, read
    for rel in UNCHANGED:                            # the same committed inode
        assert (second / rel).stat().st_ino == (first / rel).stat().st_ino
    manifest_matches_content(second)
    record = json.loads(next((Path(store) / "build").glob(f"demo-*/{STAGE_RECORD}")).read_text())
    assert set(UNCHANGED) <= set(record["files"]) and record["mac"]
    # A changed source file (same size) is hashed again and committed with its new content.
    header = project / "recipes/demo/core/core.h"
    header.write_text(header.read_text().replace("A minimal 1-D", "A minimal 1-d"))
    third, read = build()
    assert "prefix/include/demo/core.h" in read and "prefix/include/demo/ops.h" not in read
    assert "1-d tensor" in (third / "prefix/include/demo/core.h").read_text()
    manifest_matches_content(third)


def test_unchanged_meta_copies_are_linked_from_the_pool_not_copied(project, store, build,
                                                                   monkeypatch):
    """BuildContext.keep_copy: the builder's copies into meta/ of build-tree files its last
    commit staged alike are the pool's inodes from the start (no copy made); a changed one
    is copied, and the artifact holds its new content."""
    copied: list[str] = []
    real_copy2 = context.shutil.copy2

    def counting(src, dest, *a, **k):  # noqa: ANN001, ANN202
        copied.append(Path(dest).name)
        return real_copy2(src, dest, *a, **k)

    reads: list[str] = []
    real_read = build_step.read_record

    def counting_reads(*a):  # noqa: ANN002, ANN202
        reads.append(a[-1])
        return real_read(*a)

    def build_counting() -> Path:
        copied.clear()
        reads.clear()
        monkeypatch.setattr(context.shutil, "copy2", counting)  # (build() undoes patches)
        for module in (build_step, store_module):  # whoever reads the record
            monkeypatch.setattr(module, "read_record", counting_reads, raising=False)
        return build()[0]

    first = build_counting()
    assert {"CMakeCache.txt", "compile_commands.json"} <= set(copied)  # no record yet
    edit_kernel(project, 3)
    second = build_counting()
    assert "CMakeCache.txt" not in copied and "compile_commands.json" not in copied, copied
    assert len(reads) == 1, reads  # the kept copies and the install's reuse share one read
    for rel in ("meta/CMakeCache.txt", "meta/compile_commands.json"):
        assert (second / rel).stat().st_ino == (first / rel).stat().st_ino
    manifest_matches_content(second)
    # The build tree's compile_commands.json rewritten (same size): copied again, committed new.
    [tree] = (Path(store) / "build").glob("demo-*")
    cc = tree / "compile_commands.json"
    cc.write_text(cc.read_text().replace('"command"', '"COMMAND"', 1))
    edit_kernel(project, 4)
    third = build_counting()
    assert "compile_commands.json" in copied and "CMakeCache.txt" not in copied, copied
    assert '"COMMAND"' in (third / "meta/compile_commands.json").read_text()
    assert '"COMMAND"' not in (second / "meta/compile_commands.json").read_text()
    manifest_matches_content(third)


def test_a_merged_compile_commands_never_writes_into_a_kept_copy(tmp_path):
    """meta/compile_commands.json may be a committed inode (keep_copy): the merge of
    PyTorch's several compile_commands.json replaces it, never writes through it."""
    build_dir, meta = tmp_path / "build", tmp_path / "stage" / "meta"
    build_dir.mkdir()
    meta.mkdir(parents=True)
    (build_dir / "compile_commands.json").write_text('[{"file": "a.cpp"}]')
    (build_dir / "torch_compile_commands.json").write_text('[{"file": "b.cpp"}]')
    pooled = tmp_path / "pooled"
    pooled.write_text('[{"file": "a.cpp"}]')
    pooled.chmod(0o444)
    os.link(pooled, meta / "compile_commands.json")
    ctx = SimpleNamespace(build_dir=build_dir, meta=meta,
                          copies={"meta/compile_commands.json": build_dir / "compile_commands.json"})
    link_compile_commands_into_meta(ctx)
    assert pooled.read_text() == '[{"file": "a.cpp"}]'
    assert [e["file"] for e in json.loads((meta / "compile_commands.json").read_text())] == \
        ["a.cpp", "b.cpp"]
    assert "meta/compile_commands.json" not in ctx.copies


def test_a_tampered_record_links_nothing(project, store, build):
    build()
    [path] = (Path(store) / "build").glob(f"demo-*/{STAGE_RECORD}")
    record = json.loads(path.read_text())
    entry = record["files"]["prefix/include/demo/core.h"]
    # Other content of the same size in the pool, and the record pointing core.h at it:
    # believed, the next build would commit it as core.h.
    fake = Path(store) / "fake.h"
    fake.write_bytes(b"x" * entry[0])
    digest = sha256_file(fake)
    fake.chmod(0o444)
    fake.rename(Path(store) / "links" / digest)
    entry[-1] = digest
    path.write_text(json.dumps(record))
    edit_kernel(project, 2)
    art, read = build()
    assert set(UNCHANGED) <= read  # the record is not believed: everything is hashed
    assert (art / "prefix/include/demo/core.h").read_bytes() == \
        (project / "recipes/demo/core/core.h").read_bytes()
    manifest_matches_content(art)


SCRIPT = """# generated
file(INSTALL DESTINATION "${{CMAKE_INSTALL_PREFIX}}/include" TYPE FILE FILES "{src}/a.h")
include("{sub}/cmake_install.cmake")
"""


def test_the_install_map_is_kept_until_a_script_it_was_read_from_changes(tmp_path, monkeypatch):
    """install_sources keeps its map in the tree under every script's stat (and the stat of
    an include that was missing): the same scripts are not parsed again; any change is."""
    tree, src = tmp_path / "build", tmp_path / "src"
    (tree / "sub").mkdir(parents=True)
    src.mkdir()
    (tree / install_map.SCRIPT).write_text(SCRIPT.format(src=src, sub=tree / "sub"))
    digest, found = install_map.install_sources(tree)
    assert found.source_of("include/a.h") == src / "a.h"
    assert (tree / install_map.MAP_CACHE).is_file()

    def parse(text: str) -> list:
        raise AssertionError("parsed again")

    with monkeypatch.context() as m:
        m.setattr(install_map, "_install_calls", parse)
        again, kept = install_map.install_sources(tree)
    assert again == digest and kept.source_of("include/a.h") == src / "a.h"
    # The include that was missing appears: read again, its rule counts.
    (tree / "sub" / install_map.SCRIPT).write_text(
        f'file(INSTALL DESTINATION "${{CMAKE_INSTALL_PREFIX}}/lib" TYPE FILE FILES "{src}/b.so")\n')
    digest2, found2 = install_map.install_sources(tree)
    assert digest2 != digest and found2.source_of("lib/b.so") == src / "b.so"
    # A script rewritten (same size, new content): read again.
    top = tree / install_map.SCRIPT
    top.write_text(top.read_text().replace("a.h", "c.h"))
    _, found3 = install_map.install_sources(tree)
    assert found3.source_of("include/c.h") == src / "c.h" and found3.source_of("include/a.h") is None
    # A kept map of the wrong shape is not believed: parsed again, no error.
    for bad in ("{not json", '{"scripts": [], "digest": "x", "files": {}, "dirs": []}',
                json.dumps({"scripts": [[str(top), stat_sig(str(top))]], "digest": "x",
                            "files": [], "dirs": 0}),
                json.dumps({"scripts": [[str(top), stat_sig(str(top))]], "digest": "x",
                            "files": {"include/c.h": 7}, "dirs": []})):
        (tree / install_map.MAP_CACHE).write_text(bad)
        _, found4 = install_map.install_sources(tree)
        assert found4.source_of("include/c.h") == src / "c.h", bad
