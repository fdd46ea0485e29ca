"""kind = "git" sources over file:// from local bare repositories, with a nested submodule:
`doit lock` pins rev → commit + tree, the build uses that tree, identity = the tree."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from test_setuptools_builder import Env, assert_bad_input

GIT = ["git", "-c", "protocol.file.allow=always", "-c", "user.name=t", "-c", "user.email=t@t",
       "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"]


def git(*args: str, cwd: Path) -> str:
    return subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def publish(work: Path, bare: Path) -> None:
    git("init", "-q", "--bare", str(bare), cwd=work.parent)
    git("remote", "add", "origin", bare.as_uri(), cwd=work)
    git("push", "-q", "origin", "HEAD:refs/heads/main", cwd=work)


def make_repo(root: Path, name: str, files: dict[str, str]) -> Path:
    work = root / f"{name}-work"
    work.mkdir()
    git("init", "-q", cwd=work)
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", f"{name}: first", cwd=work)
    return work


@pytest.fixture(scope="module")
def repos(tmp_path_factory) -> dict[str, Path]:
    """main.git with submodule sub.git (at sub/), which has submodule inner.git (at inner/)."""
    root = tmp_path_factory.mktemp("git-repos")
    inner = make_repo(root, "inner", {"inner.h": "#define INNER_VALUE 40\n"})
    publish(inner, root / "inner.git")
    sub = make_repo(root, "sub", {"b.c": '#include "inner/inner.h"\nint sub_value(void) { return INNER_VALUE + 1; }\n'})
    git("submodule", "add", "-q", (root / "inner.git").as_uri(), "inner", cwd=sub)
    git("commit", "-q", "-m", "sub: inner", cwd=sub)
    publish(sub, root / "sub.git")
    main = make_repo(root, "main", {
        "CMakeLists.txt": "cmake_minimum_required(VERSION 3.18)\nproject(gitdemo C)\n"
                          "add_library(gitdemo SHARED a.c sub/b.c)\n"
                          "target_include_directories(gitdemo PRIVATE sub)\n"
                          "install(TARGETS gitdemo LIBRARY DESTINATION lib)\n",
        "a.c": "int sub_value(void);\nint gitdemo_answer(void) { return sub_value() + 1; }\n"})
    git("submodule", "add", "-q", (root / "sub.git").as_uri(), "sub", cwd=main)
    git("commit", "-q", "-m", "main: sub", cwd=main)
    publish(main, root / "main.git")
    return {"root": root, "main": main, "main.git": root / "main.git"}


@pytest.fixture(scope="module")
def env(tmp_path_factory, session_toolchain) -> Env:
    return Env(tmp_path_factory.mktemp("git"), session_toolchain)


def git_recipe(env: Env, name: str, url: str, rev: str, submodules: bool = True) -> None:
    (env.project / "recipes" / f"{name}.toml").write_text(
        f'[source]\nkind = "git"\nurl = "{url}"\nrev = "{rev}"\nsubmodules = {str(submodules).lower()}\n\n'
        '[build]\nsystem = "cmake"\n\n[variants.relwithdebinfo]\nbuild_type = "RelWithDebInfo"\n')


def git_lock(env: Env) -> dict:
    return json.loads((env.project / "locks" / "git-sources.json").read_text())["sources"]


def test_lock_pins_a_branch_and_the_build_uses_submodules_recursively(env, repos):
    git_recipe(env, "gitdemo", repos["main.git"].as_uri(), "main")
    unlocked = env.build("gitdemo")
    assert_bad_input(env, unlocked, "recipes/gitdemo.toml", "doit lock")
    res = env.doit("lock", "lock=git-sources")
    assert res.returncode == 0, res.output
    entry = git_lock(env)["gitdemo"]
    head = git("rev-parse", "HEAD", cwd=repos["main"])
    assert entry["commit"] == head and entry["rev"] == "main"
    assert entry["tree"] == git("rev-parse", "HEAD^{tree}", cwd=repos["main"])
    built = env.build("gitdemo")
    assert built.returncode == 0, built.output
    art = env.artifact("gitdemo")
    assert (art / "prefix" / "lib" / "libgitdemo.so").is_file()
    manifest = json.loads((art / "manifest.json").read_text())
    assert manifest["derivation"]["source"] == {"kind": "git", "tree": entry["tree"], "submodules": True}
    [tree] = (env.store / "sources").glob("git-*-sub")
    assert (tree / "sub" / "inner" / "inner.h").is_file() and not (tree / ".git").exists()


def test_a_moved_branch_changes_nothing_until_lock(env, repos):
    before = git_lock(env)["gitdemo"]["commit"]
    main = repos["main"]
    (main / "a.c").write_text("int sub_value(void);\nint gitdemo_answer(void) { return sub_value() + 2; }\n")
    git("commit", "-q", "-am", "main: moved", cwd=main)
    git("push", "-q", "origin", "HEAD:refs/heads/main", cwd=main)
    plan = env.doit("plan", "recipe=gitdemo", "format=json")
    assert plan.returncode == 0, plan.output
    assert json.loads(plan.stdout.strip().splitlines()[-1])["derivation"]["source"]["tree"] == \
        git_lock(env)["gitdemo"]["tree"]
    assert env.doit("lock", "lock=git-sources").returncode == 0
    after = git_lock(env)["gitdemo"]["commit"]
    assert after != before and after == git("rev-parse", "HEAD", cwd=main)


def test_identity_is_the_tree_not_the_url(env, repos, tmp_path):
    mirror = tmp_path / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--mirror", str(repos["main.git"]), str(mirror)], check=True)
    commit = git_lock(env)["gitdemo"]["commit"]
    git_recipe(env, "gitmirror", mirror.as_uri(), commit)
    assert env.doit("lock", "lock=git-sources").returncode == 0
    a = env.doit("plan", "recipe=gitdemo", "format=json")
    b = env.doit("plan", "recipe=gitmirror", "format=json")
    src = [json.loads(r.stdout.strip().splitlines()[-1])["derivation"]["source"] for r in (a, b)]
    assert src[0] == src[1]
    # One checkout in the store, shared by both recipes.
    assert len(list((env.store / "sources").glob(f"git-{src[0]['tree'][:16]}-sub"))) == 1


def test_unknown_rev_is_bad_input_and_changes_nothing(env, repos):
    before = (env.project / "locks" / "git-sources.json").read_text()
    git_recipe(env, "gitbad", repos["main.git"].as_uri(), "no-such-branch")
    res = env.doit("lock", "lock=git-sources")
    assert_bad_input(env, res, "recipes/gitbad.toml", "source.rev", "no-such-branch")
    assert (env.project / "locks" / "git-sources.json").read_text() == before
    (env.project / "recipes" / "gitbad.toml").unlink()


@pytest.mark.parametrize("url, rev", [
    ("--upload-pack=touch {marker};true @x:y", "main"),      # an option before the first ':'
    ("-oProxyCommand=touch% {marker}@h:p", "main"),
    ("ext::sh -c touch% {marker}", "main"),                  # a transport that runs a command
    ("ext::sh", "main"),
    ("ssh://-oProxyCommand=touch% {marker}/x", "main"),
    ("u@-oProxyCommand=x:p", "main"),
    ("{good}", "--upload-pack=touch {marker}"),              # a rev that would be an option
])
def test_a_hostile_git_recipe_is_bad_input_on_every_lock_path(env, repos, tmp_path, url, rev):
    """`doit lock lock=git-sources` and `doit lock` meet the recipe: one line naming it,
    exit 2, no command run, the lock unchanged."""
    marker = tmp_path / "ran"
    before = (env.project / "locks" / "git-sources.json").read_text()
    recipe = env.project / "recipes" / "githostile.toml"
    recipe.write_text(
        f'[source]\nkind = "git"\nurl = "{url.format(marker=marker, good=repos["main.git"].as_uri())}"\n'
        f'rev = "{rev.format(marker=marker)}"\n\n[build]\nsystem = "cmake"\n\n'
        '[variants.relwithdebinfo]\nbuild_type = "RelWithDebInfo"\n')
    try:
        for args in (("lock", "lock=git-sources"), ("lock",)):
            res = env.doit(*args)
            assert_bad_input(env, res, "recipes/githostile.toml")
            assert not marker.exists(), f"{args}: the recipe ran a command"
        assert (env.project / "locks" / "git-sources.json").read_text() == before
    finally:
        recipe.unlink()
