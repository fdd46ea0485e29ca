"""Pinned archive sources (real tar, patch, git): sha256, overlays, ordered patches, identity;
and the cheap git-aware identity of a developer checkout."""
from __future__ import annotations

import hashlib
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from orchestrator.errors import UserError
from orchestrator.hashing import StatCache
from orchestrator.model.source_archive import ArchiveSource, Overlay
from orchestrator.sources.archive import archive_identity, materialize
from orchestrator.sources.archives import obtain_archive
from orchestrator.sources.checkout import checkout_identity, prepare_checkout
from orchestrator.store.artifacts import Store


def make_tarball(path: Path, top: str, files: dict[str, str], empty_dirs: tuple[str, ...] = ()) -> str:
    src = path.parent.parent / "trees" / path.name / top
    for d in empty_dirs:
        (src / d).mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    with tarfile.open(path, "w:gz") as tar:
        tar.add(src, arcname=top)
    return hashlib.sha256(path.read_bytes()).hexdigest()


PATCH_1 = """--- a/cfg.txt
+++ b/cfg.txt
@@ -1,2 +1,2 @@
 name = demo
-foxi = on
+foxi = off
"""
PATCH_2 = """--- a/cfg.txt
+++ b/cfg.txt
@@ -1,2 +1,3 @@
 name = demo
 foxi = off
+fmt = overlay
"""


@pytest.fixture
def env(tmp_path, monkeypatch):
    archives = tmp_path / "archives"
    archives.mkdir()
    monkeypatch.setenv("ORCH_ARCHIVES", str(archives))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    main_sha = make_tarball(archives / "main-1.0.tar.gz", "main-1.0",
                            {"cfg.txt": "name = demo\nfoxi = on\n", "third_party/README": "x\n"},
                            empty_dirs=("third_party/fmt",))
    fmt_sha = make_tarball(archives / "fmt-9.tar.gz", "fmt-9", {"include/fmt/core.h": "// fmt\n"})
    recipes = tmp_path / "recipes"
    (recipes / "p").mkdir(parents=True)
    (recipes / "p" / "1.patch").write_text(PATCH_1)
    (recipes / "p" / "2.patch").write_text(PATCH_2)
    return {"archives": archives, "main": main_sha, "fmt": fmt_sha, "recipes": recipes,
            "store": Store(tmp_path / "store").ensure()}


def spec(env, patches: list[str], overlay_path: str = "third_party/fmt") -> ArchiveSource:
    return ArchiveSource(file="main-1.0.tar.gz", sha256=env["main"], patches=patches,
                         overlays=[Overlay(path=overlay_path, file="fmt-9.tar.gz", sha256=env["fmt"])])


def tree_of(env, s: ArchiveSource) -> tuple[Path, dict]:
    patches = [env["recipes"] / p for p in s.patches]
    ident = archive_identity(s, patches)
    return materialize(s, patches, ident, "demo", env["store"]), ident


def test_overlay_and_patches_in_order(env):
    tree, ident = tree_of(env, spec(env, ["p/1.patch", "p/2.patch"]))
    assert (tree / "cfg.txt").read_text() == "name = demo\nfoxi = off\nfmt = overlay\n"
    assert (tree / "third_party/fmt/include/fmt/core.h").read_text() == "// fmt\n"
    assert [p["name"] for p in ident["patches"]] == ["1.patch", "2.patch"]
    assert tree.parent == env["store"].root / "sources"
    assert not any(env["store"].tmp_dir.iterdir()), "staging must not be left behind"


def test_patch_order_is_part_of_identity_and_a_bad_order_fails_clearly(env):
    good = archive_identity(spec(env, ["p/1.patch", "p/2.patch"]),
                            [env["recipes"] / "p/1.patch", env["recipes"] / "p/2.patch"])
    bad_spec = spec(env, ["p/2.patch", "p/1.patch"])
    bad = archive_identity(bad_spec, [env["recipes"] / "p/2.patch", env["recipes"] / "p/1.patch"])
    assert good != bad
    with pytest.raises(UserError, match=r"patch 2.patch does not apply"):
        tree_of(env, bad_spec)
    assert not (env["store"].root / "sources").exists() or not any(
        (env["store"].root / "sources").iterdir()), "a failed tree must not appear"


def test_unpacked_tree_is_reused_without_reading_the_archive(env):
    s = spec(env, ["p/1.patch"])
    tree, _ = tree_of(env, s)
    (env["archives"] / "main-1.0.tar.gz").unlink()
    again, _ = tree_of(env, s)
    assert again == tree


def test_sha256_mismatch_is_a_user_error(env):
    s = ArchiveSource(file="main-1.0.tar.gz", sha256="0" * 64)
    with pytest.raises(UserError, match=r"sha256 is [0-9a-f]{64}, the recipe pins 0000"):
        obtain_archive(s, env["store"])


def test_missing_archive_without_fetch_names_where_it_looked(env):
    s = ArchiveSource(file="absent-1.0.tar.gz", sha256="0" * 64)
    with pytest.raises(UserError, match=r"absent-1.0.tar.gz not found \(looked in .*archives"):
        obtain_archive(s, env["store"])


def test_overlay_may_not_overwrite_files(env):
    with pytest.raises(UserError, match=r"third_party is not empty"):
        tree_of(env, spec(env, [], overlay_path="third_party"))


def test_overlay_path_must_stay_inside_the_tree():
    with pytest.raises(ValueError, match="plain relative path"):
        Overlay(path="../etc", file="x.tar.gz", sha256="0" * 64)


# -- developer checkout -----------------------------------------------------------------
def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})


@pytest.fixture
def checkout(tmp_path) -> Path:
    repo = tmp_path / "pytorch"
    (repo / "c10" / "util").mkdir(parents=True)
    (repo / "torch" / "lib").mkdir(parents=True)
    (repo / "c10" / "util" / "Exception.cpp").write_text("int f() { return 1; }\n")
    (repo / ".gitignore").write_text("build/\ntorch/lib/*.so*\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    return repo


def test_checkout_identity_follows_diff_and_untracked_files_only(checkout, tmp_path):
    cache = StatCache(tmp_path / "stat.json")
    base = checkout_identity(checkout, cache)
    assert base["kind"] == "git-checkout" and len(base["rev"]) == 40
    # Ignored build output and workspace links do not count.
    (checkout / "build").mkdir()
    (checkout / "build" / "CMakeCache.txt").write_text("x\n")
    os.symlink("../../.orch/profile/prefix/lib/libc10.so", checkout / "torch/lib/libc10.so")
    os.symlink("../.orch/profile/prefix/python/torch/_C.so", checkout / "torch/_C.so")
    assert checkout_identity(checkout, cache) == base
    # Nor does what `doit switch` / `doit vscode` write into the workspace.
    (checkout / ".orch").mkdir()
    (checkout / ".orch" / "env.sh").write_text("export X=1\n")
    os.symlink("profile-1-link", checkout / ".orch" / "profile")
    (checkout / ".vscode").mkdir()
    (checkout / ".vscode" / "launch.json").write_text("{}\n")
    os.symlink(".orch/profile/meta/compile_commands.json", checkout / "compile_commands.json")
    (checkout / ".lldbinit").write_text("settings set target.source-map /orch/src/pytorch .\n")
    assert checkout_identity(checkout, cache) == base
    # A tracked edit changes the diff hash; an untracked file changes the untracked hash.
    (checkout / "c10/util/Exception.cpp").write_text("int f() { return 2; }\n")
    edited = checkout_identity(checkout, cache)
    assert edited["diff_sha256"] != base["diff_sha256"] and edited["rev"] == base["rev"]
    (checkout / "c10/util/New.cpp").write_text("int g();\n")
    added = checkout_identity(checkout, cache)
    assert added["untracked_sha256"] != edited["untracked_sha256"]
    (checkout / "c10/util/New.cpp").write_text("int g(int);\n")
    assert checkout_identity(checkout, cache)["untracked_sha256"] != added["untracked_sha256"]


def test_noop_identity_reads_no_untracked_file_again(checkout, tmp_path):
    for i in range(50):
        (checkout / f"gen_{i}.cpp").write_text(f"int v{i};\n")
    cache = StatCache(tmp_path / "stat.json")
    first = checkout_identity(checkout, cache)
    assert cache.dirty and len(cache.entries) == 50
    cache.save()
    second = checkout_identity(checkout, cache)
    assert second == first
    assert not cache.dirty, "a no-op run must hash nothing (every file answered by the stat cache)"


def test_commit_changes_rev_but_not_a_clean_tree_hash(checkout, tmp_path):
    cache = StatCache(tmp_path / "stat.json")
    base = checkout_identity(checkout, cache)
    (checkout / "c10/util/Exception.cpp").write_text("int f() { return 3; }\n")
    git(checkout, "commit", "-qam", "change")
    after = checkout_identity(checkout, cache)
    assert after["rev"] != base["rev"] and after["diff_sha256"] == base["diff_sha256"]


def test_source_var_must_exist(tmp_path):
    with pytest.raises(UserError, match=r"source=.*does not exist"):
        prepare_checkout(str(tmp_path / "nope"), Store(tmp_path / "store").ensure())


def test_dirty_submodule_changes_identity(checkout, tmp_path):
    sub = tmp_path / "fmt"
    (sub / "include").mkdir(parents=True)
    (sub / "include" / "core.h").write_text("// fmt 9\n")
    git(sub, "init", "-q")
    git(sub, "add", "-A")
    git(sub, "commit", "-qm", "fmt")
    git(checkout, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub),
        "third_party/fmt")
    git(checkout, "commit", "-qm", "add fmt")
    cache = StatCache(tmp_path / "stat.json")
    base = checkout_identity(checkout, cache)
    assert base["dirty_submodules"] == {}
    (checkout / "third_party/fmt/include/core.h").write_text("// fmt 9, patched\n")
    dirty = checkout_identity(checkout, cache)
    assert set(dirty["dirty_submodules"]) == {"third_party/fmt"}
    assert dirty["dirty_submodules"]["third_party/fmt"]["diff_sha256"] != \
        checkout_identity(sub, cache)["diff_sha256"]
    (checkout / "third_party/fmt/include/core.h").write_text("// fmt 9\n")
    assert checkout_identity(checkout, cache) == base
