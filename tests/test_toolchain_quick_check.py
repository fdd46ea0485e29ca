"""The quick toolchain check's marshal copy of the file manifest (tree_manifest.read_quick):
used while the manifest is the same file, made again when it changes or is unreadable, and
it never hides a changed, missing or retargeted file."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator.store import tree_manifest

NAME = "files.json"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "toolchains" / ("a" * 32)
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "tool").write_bytes(b"#!/bin/sh\n")
    (root / "lib.txt").write_text("one\n")
    os.symlink("bin/tool", root / "link")
    tree_manifest.write(root, NAME)
    return root


def check(root: Path, cache: Path) -> tree_manifest.Changes:
    quick = tree_manifest.read_quick(root, NAME, cache)
    assert quick is not None
    return tree_manifest.quick_check(root, quick)


def test_the_copy_is_made_once_and_gives_the_json_answer(tree: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert not check(tree, cache)
    [copy] = cache.iterdir()
    assert copy.name == f"quick-{tree.name}.marshal"
    first = copy.stat()
    assert not check(tree, cache)
    assert copy.stat().st_mtime_ns == first.st_mtime_ns  # read, not written again
    assert tree_manifest.read_quick(tree, NAME, cache) == tree_manifest.quick_entries(
        tree_manifest.read(tree, NAME))


def test_changes_are_seen_through_the_copy(tree: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert not check(tree, cache)
    (tree / "lib.txt").write_text("one and more\n")
    assert check(tree, cache).first() == "lib.txt changed"
    (tree / "lib.txt").unlink()
    assert check(tree, cache).first() == "lib.txt is missing"
    os.unlink(tree / "link")
    os.symlink("lib.txt", tree / "link")
    assert "link" in check(tree, cache).changed


def test_a_rewritten_manifest_or_a_bad_copy_is_read_again(tree: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert not check(tree, cache)
    (tree / "lib.txt").write_text("two\n")
    tree_manifest.write(tree, NAME)  # a new manifest (another file): the copy is stale
    assert not check(tree, cache)
    [copy] = cache.iterdir()
    for junk in (b"", b"\x00garbage", b"\xe3" * 40):
        copy.write_bytes(junk)
        assert not check(tree, cache)
        (tree / "lib.txt").write_text("three\n")
        assert check(tree, cache).first() == "lib.txt changed"
        (tree / "lib.txt").write_text("two\n")
        tree_manifest.write(tree, NAME)


def test_no_manifest_is_none_and_a_read_only_cache_still_checks(tree: Path,
                                                                tmp_path: Path) -> None:
    assert tree_manifest.read_quick(tmp_path, NAME, tmp_path / "cache") is None
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the cache directory would be")
    quick = tree_manifest.read_quick(tree, NAME, blocked)
    assert quick is not None and not tree_manifest.quick_check(tree, quick)
