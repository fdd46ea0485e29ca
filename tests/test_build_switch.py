"""The spine end to end on the demo with real cmake/ninja/gcc: build, store, switch, gc."""
from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest


def artifacts(store: Path) -> list[Path]:
    d = store / "store"
    return sorted(d.iterdir()) if d.is_dir() else []


def build(doit, *args) -> dict:
    res = doit("build", "format=json", *args)
    assert res.returncode == 0, res.output
    return json.loads(res.stdout.strip().splitlines()[-1])


def in_env(workspace: Path, code: str) -> str:
    """Run python in a shell that sourced the workspace's env script (as a user would)."""
    script = f". '{workspace}/.orch/env.sh' && python -c '{code}'"
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")})
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_build_commits_a_complete_read_only_artifact(doit, store, project):
    info = build(doit)
    path = Path(info["path"])
    assert info["origin"] == "built" and path.parent == store / "store"
    assert path.name == f"{info['id']}-demo-relwithdebinfo" and len(info["id"]) == 40
    text = (path / "manifest.json").read_text()
    manifest = json.loads(text)
    files = {f["path"]: f for f in manifest["files"]}
    # Sorted and indented, each file entry on one line (greppable; the C encoder writes it).
    assert list(manifest) == sorted(manifest)
    assert all(json.loads(line.strip().rstrip(",")) in manifest["files"]
               for line in text.split('"files": [\n', 1)[1].split("\n  ]", 1)[0].splitlines())
    for rel in ("prefix/lib/libdemo_core.so", "prefix/lib/libdemo_ops.so",
                "meta/CMakeCache.txt", "meta/compile_commands.json", "meta/build.log",
                "meta/ninja_log"):
        assert rel in files, rel
        assert (path / rel).is_file()
    ext = [p for p in files if p.startswith("prefix/python/demo/_C.cpython-")]
    assert ext, files.keys()
    # The package's bytecode, hash-checked (PEP 552 flags 0b11), beside its source.
    pyc = [p for p in files if p.startswith("prefix/python/demo/__pycache__/__init__.cpython-")]
    assert len(pyc) == 1 and (path / pyc[0]).read_bytes()[4:8] == b"\x03\0\0\0", files.keys()
    core = files["prefix/lib/libdemo_core.so"]
    assert core["size"] == (path / core["path"]).stat().st_size and len(core["sha256"]) == 64
    assert "CMAKE_BUILD_TYPE:STRING=RelWithDebInfo" in (path / "meta/CMakeCache.txt").read_text()
    assert manifest["derivation"]["variant"]["build_type"] == "RelWithDebInfo"
    # Read-only after commit: files and directories.
    for p in [path, path / "prefix/lib", path / "prefix/lib/libdemo_core.so"]:
        assert not stat.S_IMODE(p.stat().st_mode) & 0o222, p
    # Debug info names the logical root, never this checkout's path.
    blob = (path / "prefix/lib/libdemo_ops.so").read_bytes()
    assert b"/orch/src/demo" in blob
    assert str(project).encode() not in blob
    assert manifest["prefix_map"]["/orch/src/demo"] == "source"
    # Nothing left in the temp area.
    assert not any((store / "tmp").iterdir())


def test_second_build_is_a_no_op(doit, store):
    first = build(doit)
    res = doit("build")
    assert res.returncode == 0, res.output
    assert "up to date" in res.stderr and first["id"] in res.stderr
    assert len(artifacts(store)) == 1


def test_switch_and_rollback_through_env_script(doit, store, project, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    res = doit("switch", f"workspace={ws}")
    assert res.returncode == 0, res.output
    assert in_env(ws, "import demo; print(demo.build_type())") == "RelWithDebInfo"
    assert in_env(ws, "import demo; print(demo.add([1, 2], [10, 20], alpha=0.5))") == "[6.0, 12.0]"
    res = doit("switch", f"workspace={ws}", "variant=release")
    assert res.returncode == 0, res.output
    profile = ws / ".orch" / "profile"
    assert profile.is_symlink() and os.readlink(profile) == "profile-2-link"
    assert in_env(ws, "import demo; print(demo.build_type())") == "Release"
    res = doit("rollback", f"workspace={ws}")
    assert res.returncode == 0, res.output
    assert in_env(ws, "import demo; print(demo.build_type())") == "RelWithDebInfo"
    status = doit("status", f"workspace={ws}", "format=json")
    data = json.loads(status.stdout)
    assert data["active"]["variant"] == "relwithdebinfo" and data["generation"] == 1
    assert {a["variant"] for a in data["artifacts"]} == {"relwithdebinfo", "release"}
    assert data["active"]["size"] > 0
    # Switching to what is already active adds no generation.
    res = doit("switch", f"workspace={ws}")
    assert "already active" in res.stderr
    # compile_commands.json follows the profile.
    cc = ws / "compile_commands.json"
    assert cc.is_symlink() and json.loads(cc.read_text())


def test_rollback_without_profile_is_bad_input(doit, tmp_path):
    ws = tmp_path / "empty-ws"
    ws.mkdir()
    res = doit("rollback", f"workspace={ws}")
    assert res.returncode == 2
    assert "no active profile" in res.stderr and "Traceback" not in res.output


def test_edit_rebuilds_incrementally_and_hard_links_unchanged_files(doit, store, project):
    first = Path(build(doit)["path"])
    kernel = project / "recipes/demo/ops/add_kernel.cpp"
    text = kernel.read_text()
    assert "namespace native {" in text
    # A new line shifts every line below it: the library's line table changes.
    kernel.write_text(text.replace("namespace native {", "namespace native {\n// edited\n", 1))
    second = Path(build(doit)["path"])
    assert second != first
    log = (second / "meta/build.log").read_text()
    assert "add_kernel.cpp.o" in log
    assert "core.cpp.o" not in log.split("$ ")[-2]  # the ninja step recompiled only ops
    a, b = first / "prefix/lib/libdemo_core.so", second / "prefix/lib/libdemo_core.so"
    assert a.stat().st_ino == b.stat().st_ino, "unchanged library must be hard-linked"
    assert (first / "prefix/lib/libdemo_ops.so").read_bytes() != (second / "prefix/lib/libdemo_ops.so").read_bytes()


def test_gc_keeps_recent_generations_and_the_active_profile(doit, store, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    for variant in ("relwithdebinfo", "release", "debug"):
        assert doit("switch", f"workspace={ws}", f"variant={variant}").returncode == 0
    loose = build(doit, "variant=relwithdebinfo", "recipe=demo")  # == gen 1's artifact
    (store / "tmp" / "junk.tmp-999999999-abcd").mkdir(parents=True)
    assert doit("rollback", f"workspace={ws}").returncode == 0  # active: release (gen 2)
    res = doit("gc", "keep=1", f"workspace={ws}")
    assert res.returncode == 0, res.output
    left = {p.name.split("-", 1)[1] for p in artifacts(store)}
    # keep=1: the newest generation (debug) and the active one (release) stay.
    assert left == {"demo-release", "demo-debug"}, left
    assert not Path(loose["path"]).exists()
    assert not (store / "tmp" / "junk.tmp-999999999-abcd").exists()
    assert doit("status", f"workspace={ws}", "format=json").returncode == 0
    # The profile still resolves.
    assert (ws / ".orch/profile/manifest.json").is_file()


@pytest.mark.parametrize("args, needle", [
    (("recipe=nosuch",), "unknown recipe 'nosuch'"),
    (("variant=fast",), "unknown variant 'fast'"),
    (("jobs=lots",), "jobs='lots'"),
    (("colour=red",), "unknown variable 'colour'"),
])
def test_bad_command_line_is_one_line_exit_2(doit, store, args, needle):
    res = doit("build", *args)
    assert res.returncode == 2, res.output
    assert needle in res.stderr
    assert "Traceback" not in res.output
    assert not artifacts(store)


@pytest.mark.parametrize("mutate, needle", [
    (lambda t: t.replace('[build]', '[build\n'), "malformed TOML"),
    (lambda t: t.replace('system = "cmake"', 'system = "cmake"\nflavour = "x"'), "build.flavour"),
    (lambda t: t.replace('build_type = "Release"', 'build_type = "Fast"'), "variants.release.build_type"),
    (lambda t: t.replace('path = "demo"', 'path = "nowhere"'), "does not exist"),
])
def test_bad_recipe_is_one_line_exit_2(doit, store, project, mutate, needle):
    recipe = project / "recipes/demo.toml"
    recipe.write_text(mutate(recipe.read_text()))
    res = doit("build")
    assert res.returncode == 2, res.output
    assert needle in res.stderr and "demo.toml" in res.stderr or "nowhere" in res.stderr
    assert "Traceback" not in res.output
    assert len([ln for ln in res.stderr.splitlines() if ln.strip()]) == 1
    assert not artifacts(store)


def test_malformed_lock_is_one_line_exit_2(doit, store, project):
    (project / "locks/toolchain.lock.json").write_text("{ not json")
    res = doit("build")
    assert res.returncode == 2
    assert "toolchain.lock.json: malformed JSON" in res.stderr and "Traceback" not in res.output
    assert not artifacts(store)
