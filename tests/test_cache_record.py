"""The record model's path rules: what a (even validly signed) record may not make us write."""
from __future__ import annotations

import pytest

from orchestrator.hashing import digest_of
from orchestrator.model.cache_record import CacheRecord, escapes, path_problem
from orchestrator.model.manifest import FileEntry, Manifest

SHA = "a" * 64


def _manifest(*files: FileEntry) -> Manifest:
    derivation = {"schema": 1, "x": "y"}
    return Manifest(id=digest_of(derivation)[:40], recipe="demo", variant="release",
                    derivation=derivation, files=list(files))


@pytest.mark.parametrize("path,problem", [
    ("prefix/lib/a.so", None),
    ("../x", "'..'"), ("prefix/../../x", "'..'"), ("/etc/passwd", "absolute"),
    ("prefix//a", "not normalized"), ("./a", "not normalized"), ("", "empty"),
    ("manifest.json", "manifest.json"),
])
def test_path_rules(path: str, problem: str | None) -> None:
    got = path_problem(path)
    assert (got is None) if problem is None else (problem in (got or ""))


@pytest.mark.parametrize("link,target,links,escaping", [
    ("prefix/lib/libx.so", "libx.so.1", {}, False),
    ("prefix/lib/libx.so", "../../meta/build.log", {}, False),
    ("prefix/lib/libx.so", "../../../x", {}, True),
    ("prefix/lib/libx.so", "/usr/lib/libx.so", {}, True),
    # `up` is itself a symlink to "..": the kernel resolves up/.. from prefix/, not prefix/lib/
    ("prefix/lib/evil", "up/../../x", {"prefix/lib/up": ".."}, True),
    ("prefix/lib/ok", "up/lib", {"prefix/lib/up": ".."}, False),
    ("prefix/lib/loop", "a", {"prefix/lib/a": "b", "prefix/lib/b": "a"}, True),
])
def test_symlink_escape(link: str, target: str, links: dict[str, str], escaping: bool) -> None:
    assert escapes(link, target, {**links, link: target}) is escaping


def test_record_refuses_files_below_symlinks_and_id_mismatch() -> None:
    ok = _manifest(FileEntry(path="prefix/lib/a", kind="file", size=1, sha256=SHA))
    CacheRecord.for_manifest(ok)
    below = _manifest(FileEntry(path="prefix/lib", kind="symlink", target="../meta"),
                      FileEntry(path="prefix/lib/a", kind="file", size=1, sha256=SHA))
    with pytest.raises(ValueError, match="below the symlink"):
        CacheRecord.for_manifest(below)
    dup = _manifest(FileEntry(path="a", kind="file", size=1, sha256=SHA),
                    FileEntry(path="a", kind="file", size=1, sha256=SHA))
    with pytest.raises(ValueError, match="duplicate"):
        CacheRecord.for_manifest(dup)
    wrong_id = ok.model_copy(update={"id": "b" * 40})
    with pytest.raises(ValueError, match="not the hash of the record's derivation"):
        CacheRecord.for_manifest(wrong_id)
