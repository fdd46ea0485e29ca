"""Recipe source features: source.subdir, patches on path sources (a patched copy; the
checkout untouched), archives fetched from a file:// URL and from a PyPI sdist (real pip
against a local find-links directory), and the bad input of each."""
from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import pytest
from conftest import run_doit
from test_setuptools_builder import Env, assert_bad_input

CMAKE = ("cmake_minimum_required(VERSION 3.18)\nproject(tiny C)\nadd_library(tiny SHARED tiny.c)\n"
         "install(TARGETS tiny LIBRARY DESTINATION lib)\n")
TINY_C = "int tiny_value(void) { return 1; }\n"
# Patches apply to the source's root (subdir is taken after them).
PATCH = """--- a/pkg/tiny.c
+++ b/pkg/tiny.c
@@ -1 +1 @@
-int tiny_value(void) { return 1; }
+int tiny_value(void) { return 2; }
"""
VARIANTS = '[build]\nsystem = "cmake"\n\n[variants.relwithdebinfo]\nbuild_type = "RelWithDebInfo"\n'


@pytest.fixture(scope="module")
def env(tmp_path_factory, session_toolchain) -> Env:
    e = Env(tmp_path_factory.mktemp("sources"), session_toolchain)
    proj = e.project / "recipes" / "tinysrc"
    (proj / "pkg").mkdir(parents=True)
    (proj / "README").write_text("a stray file at the root\n")
    (proj / "pkg" / "CMakeLists.txt").write_text(CMAKE)
    (proj / "pkg" / "tiny.c").write_text(TINY_C)
    (e.project / "recipes" / "tinysrc" / "fix.patch").write_text(PATCH)
    return e


def recipe(env: Env, name: str, source: str) -> None:
    (env.project / "recipes" / f"{name}.toml").write_text(f"[source]\n{source}\n\n{VARIANTS}")


def plan_source(env: Env, name: str) -> dict:
    res = env.doit("plan", f"recipe={name}", "format=json")
    assert res.returncode == 0, res.output
    return json.loads(res.stdout.strip().splitlines()[-1])["derivation"]["source"]


def test_subdir_of_a_path_source_builds(env):
    recipe(env, "tinysub", 'kind = "path"\npath = "tinysrc"\nsubdir = "pkg"')
    res = env.build("tinysub")
    assert res.returncode == 0, res.output
    assert (env.artifact("tinysub") / "prefix" / "lib" / "libtiny.so").is_file()
    assert plan_source(env, "tinysub")["subdir"] == "pkg"


def test_missing_subdir_is_bad_input(env):
    recipe(env, "tinynosub", 'kind = "path"\npath = "tinysrc"\nsubdir = "nope"')
    assert_bad_input(env, env.build("tinynosub"), "recipes/tinynosub.toml", "source.subdir", "nope")
    recipe(env, "tinyescape", 'kind = "path"\npath = "tinysrc"\nsubdir = "../demo"')
    assert_bad_input(env, env.build("tinyescape"), "tinyescape.toml", "subdir")


def test_patches_on_a_path_source_patch_a_copy(env):
    recipe(env, "tinypatched", 'kind = "path"\npath = "tinysrc"\nsubdir = "pkg"\n'
                               'patches = ["tinysrc/fix.patch"]')
    res = env.build("tinypatched")
    assert res.returncode == 0, res.output
    checkout = env.project / "recipes" / "tinysrc" / "pkg" / "tiny.c"
    assert checkout.read_text() == TINY_C  # never modified
    [copy] = (env.store / "sources").glob("*-tinypatched")
    assert "return 2" in (copy / "pkg" / "tiny.c").read_text()
    src = plan_source(env, "tinypatched")
    assert src["patches"][0]["name"] == "fix.patch"
    recipe(env, "tinyplain", 'kind = "path"\npath = "tinysrc"\nsubdir = "pkg"')
    assert src["tree_sha256"] == plan_source(env, "tinyplain")["tree_sha256"]
    assert "patches" not in plan_source(env, "tinyplain")


def test_a_patch_that_does_not_apply_is_bad_input(env):
    bad = env.project / "recipes" / "tinysrc" / "bad.patch"
    bad.write_text(PATCH.replace("return 1", "return 7"))
    recipe(env, "tinybadpatch", 'kind = "path"\npath = "tinysrc"\nsubdir = "pkg"\n'
                                'patches = ["tinysrc/bad.patch"]')
    assert_bad_input(env, env.build("tinybadpatch"), "bad.patch", "does not apply")
    assert not list((env.store / "sources").glob("*-tinybadpatch"))


def make_tarball(dest: Path, top: str, files: dict[str, str]) -> str:
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(dest, "w:gz") as tf:
        for rel, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{rel}")
            info.size = len(data)
            info.mtime = 315532800
            tf.addfile(info, io.BytesIO(data))
    return hashlib.sha256(dest.read_bytes()).hexdigest()


def test_archive_from_a_file_url_with_subdir(env, tmp_path):
    tarball = tmp_path / "dl" / "tiny-1.0.tar.gz"
    sha = make_tarball(tarball, "tiny-1.0", {"pkg/CMakeLists.txt": CMAKE, "pkg/tiny.c": TINY_C,
                                            "setup.py": "# a python wrapper\n"})
    recipe(env, "tinyurl", f'kind = "archive"\nfile = "tiny-1.0.tar.gz"\nsha256 = "{sha}"\n'
                           f'subdir = "pkg"\nfetch = {{ url = "{tarball.as_uri()}" }}')
    res = env.build("tinyurl")
    assert res.returncode == 0, res.output
    assert (env.store / "archives" / "tiny-1.0.tar.gz").is_file()
    assert (env.artifact("tinyurl") / "prefix" / "lib" / "libtiny.so").is_file()


def test_archive_not_found_names_the_environment_variable(env):
    recipe(env, "tinymissing", 'kind = "archive"\nfile = "absent-1.0.tar.gz"\nsha256 = "' + "0" * 64 + '"')
    assert_bad_input(env, env.build("tinymissing"), "absent-1.0.tar.gz", "$ORCH_ARCHIVES")


def test_archive_from_a_pypi_sdist(env, tmp_path):
    index = tmp_path / "index"
    setup = "from setuptools import setup\nsetup(name='tinysdist', version='1.0')\n"
    sha = make_tarball(index / "tinysdist-1.0.tar.gz", "tinysdist-1.0", {
        "setup.py": setup, "PKG-INFO": "Metadata-Version: 2.1\nName: tinysdist\nVersion: 1.0\n",
        "cpp/CMakeLists.txt": CMAKE, "cpp/tiny.c": TINY_C})
    recipe(env, "tinypypi", f'kind = "archive"\nfile = "tinysdist-1.0.tar.gz"\nsha256 = "{sha}"\n'
                            'subdir = "cpp"\nfetch = { pypi = "tinysdist==1.0" }')
    pip_env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(index), "PIP_CONFIG_FILE": os.devnull}
    res = run_doit(env.project, "build", "recipe=tinypypi", f"store={env.store}", "substitute=0",
                   env=pip_env)
    assert res.returncode == 0, res.output
    assert (env.artifact("tinypypi") / "prefix" / "lib" / "libtiny.so").is_file()


def test_two_fetch_kinds_are_bad_input(env):
    recipe(env, "tinytwo", 'kind = "archive"\nfile = "x-1.tar.gz"\nsha256 = "' + "0" * 64 + '"\n'
                           'fetch = { url = "file:///x", pypi = "x==1" }')
    assert_bad_input(env, env.build("tinytwo"), "tinytwo.toml", "fetch")


# A real sdist from the package index whose build backend (hatchling, hatch-vcs) is not in the
# orchestrator's environment: the fetch needs none of it, as nothing of the sdist runs.
INICONFIG = ('kind = "archive"\nfile = "iniconfig-2.0.0.tar.gz"\n'
             'sha256 = "2d91e135bf72d31a410b17c16da610a82cb55f6b0477d1a902134b24a455b8b3"\n')


def test_pypi_fetch_of_a_real_sdist_runs_nothing_of_it(env):
    recipe(env, "realsdist", INICONFIG + 'fetch = { pypi = "iniconfig==2.0.0" }')
    assert plan_source(env, "realsdist")["sha256"].startswith("2d91e135")
    fetched = env.store / "archives" / "iniconfig-2.0.0.tar.gz"
    assert hashlib.sha256(fetched.read_bytes()).hexdigest().startswith("2d91e135")


def test_pypi_fetch_failure_says_pips_cause(env):
    recipe(env, "nosdist", INICONFIG.replace("2.0.0.tar", "0.0.404.tar")
           + 'fetch = { pypi = "iniconfig==0.0.404" }')
    res = env.doit("plan", "recipe=nosdist")
    assert_bad_input(env, res, "iniconfig==0.0.404", "no sdist", "2.0.0", "PIP_INDEX_URL")
    assert "source.file" not in res.output
    recipe(env, "othername", INICONFIG.replace("2.0.0.tar", "2.0.tar")
           + 'fetch = { pypi = "iniconfig==2.0.0" }')
    assert_bad_input(env, env.doit("plan", "recipe=othername"),
                     "set source.file = 'iniconfig-2.0.0.tar.gz'")
    # An index that cannot be read: pip's own line for it (its finder only logs it).
    res = run_doit(env.project, "plan", "recipe=nosdist", f"store={env.store}", env={
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_EXTRA_INDEX_URL": "",
        "PIP_FIND_LINKS": "", "PIP_CONFIG_FILE": os.devnull, "PIP_RETRIES": "0"})
    assert_bad_input(env, res, "Could not fetch URL http://127.0.0.1:9/simple/iniconfig/",
                     "Connection refused")


def test_a_fetched_archive_with_another_digest_names_it_and_is_not_kept(env, tmp_path):
    tarball = tmp_path / "dl" / "tinybad-1.0.tar.gz"
    sha = make_tarball(tarball, "tinybad-1.0", {"pkg/CMakeLists.txt": CMAKE, "pkg/tiny.c": TINY_C})
    recipe(env, "tinybad", f'kind = "archive"\nfile = "tinybad-1.0.tar.gz"\nsha256 = "{"0" * 64}"\n'
                           f'subdir = "pkg"\nfetch = {{ url = "{tarball.as_uri()}" }}')
    res = env.build("tinybad")
    assert_bad_input(env, res, f'tinybad-1.0.tar.gz as fetched has sha256 {sha}',
                     "the file was not kept", f'set sha256 = "{sha}"')
    assert not (env.store / "archives" / "tinybad-1.0.tar.gz").exists()
