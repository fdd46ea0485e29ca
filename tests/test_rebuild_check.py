"""rebuild=1, check=1 (reproducibility) and commit_failed=1 on real cmake/ninja/gcc builds of
the demo; re-verification when a present artifact's verify rules changed."""
from __future__ import annotations

import json
from pathlib import Path

from orchestrator.model.manifest import Manifest


def artifact_dir(store: Path) -> Path:
    [path] = [p for p in (store / "store").iterdir() if p.is_dir()]
    return path


def leftovers(store: Path, prefix: str) -> list[Path]:
    tmp = store / "tmp"
    return [p for p in tmp.iterdir() if p.name.startswith(prefix)] if tmp.is_dir() else []


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def test_demo_passes_check(doit, store):
    built = doit("build")
    assert built.returncode == 0, built.output
    art = artifact_dir(store)
    manifest_before = (art / "manifest.json").read_bytes()
    res = doit("build", "check=1", "format=json")
    assert res.returncode == 0, res.output
    data = last_json(res.stdout)
    cmp = data["comparison"]
    assert data["origin"] == "present" and cmp["mode"] == "check" and cmp["identical"] is True
    statuses = {f["path"]: f["status"] for f in cmp["files"]}
    prefix = [p for p in statuses if p.startswith("prefix/")]
    assert "prefix/lib/libdemo_ops.so" in prefix
    assert all(statuses[p] == "identical" for p in prefix), statuses
    assert statuses["meta/build.log"] == "record"
    assert "identical prefix/lib/libdemo_core.so" in res.stderr
    assert "compile cache off" in res.stderr and "/tmp/check-" in res.stderr
    assert leftovers(store, "check-") == []            # the check's tree and output are gone
    assert (art / "manifest.json").read_bytes() == manifest_before


def make_path_dependent(project: Path) -> None:
    """Bake the build tree's path into libdemo_core.so: a build elsewhere differs."""
    cml = project / "recipes/demo/CMakeLists.txt"
    text = cml.read_text()
    old = 'DEMO_BUILD_TYPE="${CMAKE_BUILD_TYPE}")'
    assert old in text
    cml.write_text(text.replace(old, 'DEMO_BUILD_TYPE="${CMAKE_BUILD_TYPE}" '
                                     'DEMO_TREE="${CMAKE_BINARY_DIR}")'))
    with open(project / "recipes/demo/core/core.cpp", "a") as f:
        f.write('\nextern "C" __attribute__((visibility("default"))) const char* demo_tree() '
                '{ return DEMO_TREE; }\n')


def test_check_finds_a_path_dependent_build(project, doit, store):
    make_path_dependent(project)
    built = doit("build", "commit_failed=1")
    assert built.returncode == 0, built.output
    art = artifact_dir(store)
    before = Manifest.model_validate_json((art / "manifest.json").read_text())
    res = doit("build", "check=1")
    assert res.returncode == 1, res.output
    assert "Traceback" not in res.output
    assert "different prefix/lib/libdemo_core.so (first differing section: .rodata)" in res.output
    assert "identical prefix/include/demo/core.h" in res.output
    assert "not reproducible" in res.output
    assert leftovers(store, "check-") == []
    assert Manifest.model_validate_json((art / "manifest.json").read_text()) == before
    # the store entry itself is untouched: every file still has its recorded content
    from orchestrator.hashing import sha256_file
    assert all(sha256_file(art / f.path) == f.sha256 for f in before.files if f.kind == "file")


def test_rebuild_builds_again_and_compares(doit, store):
    built = doit("build")
    assert built.returncode == 0, built.output
    art = artifact_dir(store)
    [tree] = list((store / "build").iterdir())
    (tree / "marker-from-the-test").write_text("x")
    res = doit("build", "rebuild=1", "format=json")
    assert res.returncode == 0, res.output
    cmp = last_json(res.stdout)["comparison"]
    assert cmp["mode"] == "rebuild" and cmp["identical"] is True and cmp["kept"] is None
    assert not (tree / "marker-from-the-test").exists()   # a clean build of the tree
    assert (tree / "build.ninja").is_file()
    assert artifact_dir(store) == art and leftovers(store, "rebuild") == []


def test_force_is_refused_with_the_new_name(doit):
    res = doit("build", "force=1")
    assert res.returncode == 2, res.output
    assert "commit_failed=1" in res.output and "Traceback" not in res.output


def test_changed_verify_rules_reverify_the_present_artifact(project, doit, store):
    assert doit("build").returncode == 0
    art = artifact_dir(store)
    recipe = project / "recipes/demo.toml"
    text = recipe.read_text()
    recipe.write_text(text.replace('["demo::native::add_kernel*"]',
                                   '["demo::native::add_kernel*", "demo::no_such_symbol*"]'))
    res = doit("build")
    assert res.returncode == 1, res.output
    assert "verifying it again" in res.output and "no_such_symbol" in res.output
    assert artifact_dir(store) == art                     # same id: nothing rebuilt
    again = doit("build")                                 # the verdict is remembered
    assert again.returncode == 1 and "verifying it again" not in again.output
    accepted = doit("build", "commit_failed=1")
    assert accepted.returncode == 0, accepted.output
    recipe.write_text(text)                               # the rules it was built under
    same = doit("build")
    assert same.returncode == 0 and "verifying it again" not in same.output, same.output


def test_check_rehashes_the_toolchain_first(doit, store):
    """check=1 runs the full re-hash of `doit verify toolchain=1` before building: a file
    changed in place (same size and mtime, so every-use check cannot see it) is drift."""
    import os

    built = doit("build")
    assert built.returncode == 0, built.output
    [tc] = list((store / "toolchains").iterdir())
    f = tc.resolve() / "venv" / "pyvenv.cfg"
    original, st = f.read_bytes(), f.stat()
    try:
        f.write_bytes(original[:-1] + (b"X" if original[-1:] != b"X" else b"Y"))
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert doit("build").returncode == 0  # the cheap check at every use passes
        res = doit("build", "check=1")
        assert res.returncode == 2, res.output
        assert "toolchain drift:" in res.stderr and "venv/pyvenv.cfg changed" in res.stderr
        assert "Traceback" not in res.stderr and "check: building" not in res.stderr
    finally:
        f.write_bytes(original)
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert leftovers(store, "check-") == []
