"""The record model's path rules: what a (even validly signed) record may not make us write."""
from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.cache.pack_upload import PACK_FILE_MAX, PACK_LIMIT, group_small
from orchestrator.hashing import digest_of
from orchestrator.model.cache_record import PACKED_FORMAT, RECORD_FORMAT, CacheRecord, escapes, path_problem
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


def _packed(members: list[tuple[str, int, int]], size: int | None = None) -> dict:
    """A record payload whose one pack holds (sha256, offset, length) members."""
    files = [FileEntry(path=f"prefix/f{i}", kind="file", size=10, sha256=c * 64)
             for i, c in enumerate("abc")]
    doc = CacheRecord.for_manifest(_manifest(*files)).payload()
    end = max(o + n for _, o, n in members)
    doc["format"] = PACKED_FORMAT
    doc["packs"] = [{"sha256": "d" * 64, "size": end if size is None else size,
                     "members": [{"sha256": s, "offset": o, "length": n} for s, o, n in members]}]
    return doc


def test_packed_record_layout_rules() -> None:
    good = [("a" * 64, 0, 20), ("b" * 64, 20, 25)]
    record = CacheRecord.model_validate(_packed(good))
    assert record.pack_members()["b" * 64] == (record.packs[0], 1)
    assert record.payload()["packs"] and CacheRecord.for_manifest(record.manifest).payload() \
        .get("packs") is None  # no packs: the field is left out, the record reads as /1
    for members, size, problem in [
        ([("a" * 64, 0, 20), ("b" * 64, 21, 25)], None, "not where the previous frame ends"),
        ([("a" * 64, 0, 20), ("b" * 64, 19, 25)], None, "not where the previous frame ends"),
        ([("a" * 64, 0, 20), ("a" * 64, 20, 25)], None, "placed twice"),
        ([("e" * 64, 0, 20)], None, "no file content of the manifest"),
        ([("a" * 64, 0, 0)], 1, "out of bounds"),
        ([("a" * 64, 0, 10 ** 6)], None, "out of bounds"),
        (good, 46, "members end at 45"),
    ]:
        with pytest.raises(ValueError, match=problem):
            CacheRecord.model_validate(_packed(members, size))
    old = _packed(good)
    old["format"] = RECORD_FORMAT
    with pytest.raises(ValueError, match="has no packs"):
        CacheRecord.model_validate(old)


def test_content_defined_packs() -> None:
    """Group boundaries depend on each content alone: one changed content moves at most the
    boundaries around it, and no pack passes the limit."""
    contents = [(f"{(i * 2654435761) % (1 << 64):016x}" * 4, 3000 + i % 5000, Path(f"f{i}"))
                for i in range(3000)]
    groups, loose = group_small(contents + [("f" * 64, PACK_FILE_MAX + 1, Path("big"))])
    assert [c[2].name for c in loose] == ["big"]
    assert [c for g in groups for c in g] == contents
    assert all(sum(c[1] for c in g) <= PACK_LIMIT for g in groups) and len(groups) > 3
    changed = list(contents)
    changed[1500] = ("0" * 64, 3000, Path("f1500"))
    before = {tuple(c[0] for c in g) for g in groups}
    after = {tuple(c[0] for c in g) for g in group_small(changed)[0]}
    assert len(after - before) <= 2
