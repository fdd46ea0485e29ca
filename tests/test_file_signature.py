"""One file-signature type (issue 28): the caches and memos that ask "is this file unchanged
without reading it" use fs.FileSig; a module that spells out its own stat tuple is listed
here with the reason it differs."""
from __future__ import annotations

import os
import re
from pathlib import Path

from orchestrator.fs import FileSig
from orchestrator.hashing import StatCache

PACKAGE = Path(__file__).resolve().parents[1] / "orchestrator"
# module -> why it reads mtime/ctime itself
OWN_STAT = {
    "fs.py": "defines FileSig",
    "store/tree_manifest.py": "the files manifest: FileSig less ctime (a hard link moves it)",
    "cache/toolchain_pull.py": "writes the same files manifest as tree_manifest",
    "builders/compile_cache/sccache_compile.py": "runs with the standard library only",
    "builders/wheel.py": "compares a copy with its source, not a file with its past",
    "store/artifacts.py": "compares a copy with its source, not a file with its past",
    "builders/pytorch_source.py": "compares a copy with its source, not a file with its past",
    "builders/relink.py": "orders a link output and the libraries it links by mtime, as ninja does",
}


def test_no_module_spells_out_its_own_stat_signature() -> None:
    found = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
             if re.search(r"\bst_(mtime|ctime)_ns\b", p.read_text())}
    assert found == set(OWN_STAT), sorted(found ^ set(OWN_STAT))


def test_a_rewrite_that_restores_the_mtime_is_seen(tmp_path) -> None:
    f = tmp_path / "a.txt"
    f.write_text("one")
    before = FileSig.of(f.stat())
    cache = StatCache(tmp_path / "stat-cache.json")
    first = cache.sha256(f)
    os.utime(f, ns=(before.mtime_ns, before.mtime_ns))
    f.write_text("two")  # same size
    os.utime(f, ns=(before.mtime_ns, before.mtime_ns))  # mtime restored, ctime moved
    after = FileSig.of(f.stat())
    assert (after.size, after.mtime_ns, after.ino) == (before.size, before.mtime_ns, before.ino)
    assert after != before  # the ctime tells
    assert cache.sha256(f) != first
