"""What makes a repeated verify cheap, and what keeps it honest: a process that only verifies
imports no pydantic or pyelftools, the engine's default rules are the recipe model's, and the
verdict cache (verify/cache.py) reuses a file's verdict only while nothing it depends on
changed and only from entries this store wrote."""
from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.model.verify_rules import VerifyRules
from orchestrator.verify.cache import RootKeys, VerdictCache
from orchestrator.verify.engine import verify_tree
from orchestrator.verify.inputs import DefaultRules, VerifyConfig, rules_data
from orchestrator.verify.report import FileFacts
from orchestrator.verify.resolve import Resolver, SearchConfig


def test_default_rules_are_the_recipe_models_defaults() -> None:
    assert rules_data(DefaultRules()) == VerifyRules().model_dump(mode="json", exclude={"ignore"})
    assert list(DefaultRules().ignore) == VerifyRules().ignore == []
    assert rules_data(VerifyRules(host="torch"))["host"] == "torch"


def test_verify_engine_imports_no_pydantic_and_no_pyelftools() -> None:
    code = ("import sys; from orchestrator.verify.inputs import VerifyConfig; "
            "from orchestrator.verify.engine import verify_tree; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'elftools')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- the verdict cache (verify/cache.py) on real gcc-built libraries ------------------------

def cc(out: Path, src: str, *flags: str) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    srcfile = out.with_name(out.name + ".c")
    srcfile.write_text(src)
    subprocess.run(["gcc", "-fPIC", "-shared", "-o", str(out), str(srcfile), *flags], check=True,
                   capture_output=True, text=True)
    srcfile.unlink()
    return out


GOOD_LEAF = "int leaf_one(void){return 1;}"
BAD_LEAF = "int leaf_other(void){return 2;}"  # leaf_one is gone


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """art/lib/libuse.so needs leaf_one from art/lib/libleaf.so (RUNPATH $ORIGIN)."""
    lib = tmp_path / "art" / "lib"
    cc(lib / "libleaf.so", GOOD_LEAF, "-Wl,-soname,libleaf.so")
    cc(lib / "libuse.so", "int leaf_one(void); int use(void){return leaf_one();}",
       f"-L{lib}", "-lleaf", "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN")
    return tmp_path / "art"


def config(art: Path, cache: Path, **kw) -> VerifyConfig:
    search = kw.pop("search", SearchConfig(ld_library_path=[], conf_dirs=[],
                                           default_dirs=["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu"]))
    return VerifyConfig(artifact="art", root=art, prefix=art, search=search, cache_dir=cache, **kw)


def replace_leaf(art: Path, src: str) -> None:
    """A rebuilt libleaf.so, written in place as some link steps do (same inode)."""
    new = cc(art.parent / "new" / "libleaf.so", src, "-Wl,-soname,libleaf.so")
    (art / "lib" / "libleaf.so").write_bytes(new.read_bytes())


def test_unchanged_files_are_not_checked_again(tree, tmp_path):
    cache = tmp_path / "cache"
    first = verify_tree(config(tree, cache))
    assert first.ok and first.reused == []
    second = verify_tree(config(tree, cache))
    assert second.ok and second.reused == ["lib/libleaf.so", "lib/libuse.so"]
    assert second.files == first.files and second.checks == first.checks
    # Other rules: another key, checked again.
    other = verify_tree(config(tree, cache, rules=VerifyRules(max_versions={"GLIBC": "2.50"})))
    assert other.ok and other.reused == []


def test_a_changed_library_is_checked_again_and_so_is_what_loads_it(tree, tmp_path):
    cache = tmp_path / "cache"
    assert verify_tree(config(tree, cache)).ok
    replace_leaf(tree, BAD_LEAF)
    report = verify_tree(config(tree, cache))
    assert report.reused == []  # libuse.so did not change, but its closure did
    assert any("undefined symbol leaf_one needed by lib/libuse.so" in f.cause for f in report.failures())


def test_a_new_library_earlier_on_the_search_path_is_noticed(tree, tmp_path):
    cache = tmp_path / "cache"
    early = tmp_path / "early"
    early.mkdir()
    search = SearchConfig(ld_library_path=[str(early)], conf_dirs=[], default_dirs=[])
    assert verify_tree(config(tree, cache, search=search)).ok
    cc(early / "libleaf.so", BAD_LEAF, "-Wl,-soname,libleaf.so")  # LD_LIBRARY_PATH beats RUNPATH
    report = verify_tree(config(tree, cache, search=search))
    assert "lib/libuse.so" not in report.reused and not report.ok


def test_a_tampered_entry_does_not_make_a_bad_library_pass(tree, tmp_path):
    cache = tmp_path / "cache"
    good = config(tree, cache)
    assert verify_tree(good).ok
    good_key = RootKeys(good, Resolver(good.search)).key(tree / "lib" / "libuse.so", "lib/libuse.so")
    entry = VerdictCache.open(cache)._path(good_key)  # type: ignore[union-attr]
    replace_leaf(tree, BAD_LEAF)
    bad = config(tree, cache)
    bad_key = RootKeys(bad, Resolver(bad.search)).key(tree / "lib" / "libuse.so", "lib/libuse.so")
    assert bad_key != good_key
    # 1. the clean entry copied under the bad file's key (its MAC covers the old key)
    forged = json.loads(entry.read_text())
    forged["key"] = bad_key
    target = VerdictCache.open(cache)._path(bad_key)  # type: ignore[union-attr]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(forged))
    assert not verify_tree(bad).ok
    # 2. an entry MACed with another secret
    VerdictCache(cache, b"not the store's secret").put(bad_key, FileFacts(), [])
    assert not verify_tree(bad).ok
    # 3. an entry edited in place: ignored, the file checked again
    data = json.loads(entry.read_text())
    data["verdict"]["facts"]["needed"] = ["libother.so"]
    entry.write_text(json.dumps(data))
    assert VerdictCache.open(cache).get(good_key) is None  # type: ignore[union-attr]
    # and the cache's secret is the owner's alone
    assert stat.S_IMODE((cache / "key").stat().st_mode) == 0o600


def test_a_relinked_library_with_the_same_exports_keeps_the_verdicts_of_what_loads_it(tree, tmp_path):
    """The edit loop: an edited function body relinks libtorch_cpu.so; libtorch_python.so,
    which loads it, is not checked again while the exports it sees are the same."""
    cache = tmp_path / "cache"
    assert verify_tree(config(tree, cache)).ok
    replace_leaf(tree, "int leaf_one(void){return 41 + 1;}")  # another body, the same exports
    report = verify_tree(config(tree, cache))
    assert report.ok and report.reused == ["lib/libuse.so"]  # libleaf.so itself: checked again
    # a new export is another interface: what loads the library is checked again
    replace_leaf(tree, GOOD_LEAF + " int leaf_two(void){return 2;}")
    assert verify_tree(config(tree, cache)).reused == []


def test_another_build_directory_reuses_verdicts_and_still_finds_runpaths_into_it(tree, tmp_path):
    """Each edit of a checkout builds from another patched copy of the source: the key does
    not hold the build directories, and the RUNPATH check runs on reused files too."""
    cache = tmp_path / "cache"
    build = Path("/srv/orch-sources/copy-1")  # a string in the RUNPATH: outside /tmp and homes
    cc(tree / "lib" / "libdev.so", "int dev(void){return 3;}", f"-Wl,-rpath,{build}",
       "-Wl,--enable-new-dtags")
    first = verify_tree(config(tree, cache, build_dirs=[build.with_name("copy-0")]))
    assert first.ok, first.failures()
    again = verify_tree(config(tree, cache, build_dirs=[build]))
    assert "lib/libdev.so" in again.reused and "lib/libuse.so" in again.reused
    assert [(f.file, f.check) for f in again.failures()] == [("lib/libdev.so", "portability")]
    assert f"points into the build directory {build}" in again.failures()[0].cause
