"""`[runtime] requires` (issue 33, item 2): a recipe's import-time requirements are pinned by
`doit lock` (real pip, the package index's wheels by sha256), installed by the build into the
store entry's runtime/site-packages and put on PYTHONPATH by a switch and by `doit run`: after
`doit switch`, `import` works with nothing installed by hand. Built with the real setuptools
on the cext tree (one small C file); python-dateutil pulls in six as its own dependency."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import DoitResult, copy_project, make_store, run_doit

RECIPE = """description = "cext, with what it imports at run time"
[source]
kind = "path"
path = "cext"
[build]
system = "setuptools"
[variants.relwithdebinfo]
build_type = "RelWithDebInfo"
cflags = ["-gdwarf-4", "-fno-reorder-blocks-and-partition"]
[verify]
opt_level = { relwithdebinfo = "2" }
[runtime]
requires = [%s]
"""
DATEUTIL = '"python-dateutil==2.9.0.post0"'
IMPORTS = "import cext, dateutil, six; print(dateutil.__version__, six.__version__, dateutil.__file__)"


class Env:
    def __init__(self, root: Path, toolchain: Path) -> None:
        self.project = copy_project(root / "project")
        self.store = make_store(root / "store", toolchain)
        self.workspace = root / "ws"
        self.workspace.mkdir()
        self.recipe = self.project / "recipes" / "cextrt.toml"
        self.write(DATEUTIL)

    def write(self, requires: str) -> None:
        self.recipe.write_text(RECIPE % requires)

    def doit(self, *args: str) -> DoitResult:
        extra = [f"store={self.store}"]
        if args[0] in ("switch",):
            extra.append(f"workspace={self.workspace}")
        if args[0] in ("build", "switch"):
            extra.append("substitute=0")
        cut = args.index("--") if "--" in args else len(args)  # `doit run ... -- CMD`
        return run_doit(self.project, *args[:cut], *extra, *args[cut:])

    def python(self, code: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", f". '{self.workspace}/.orch/env.sh' && python -c '{code}'"],
                              capture_output=True, text=True,
                              env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")})


@pytest.fixture(scope="module")
def env(tmp_path_factory, session_toolchain) -> Env:
    e = Env(tmp_path_factory.mktemp("runtime"), session_toolchain)
    res = e.doit("lock", "recipe=cextrt")
    assert res.returncode == 0, res.output
    return e


def downloaded_sha256(tmp: Path, pin: str) -> str:
    """The sha256 of the wheel pip itself downloads for `pin` (its own index settings)."""
    res = subprocess.run(["/usr/bin/python3", "-m", "pip", "download", "--quiet", "--no-deps",
                          "--only-binary=:all:", "-d", str(tmp), pin],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    [whl] = tmp.glob("*.whl")
    return hashlib.sha256(whl.read_bytes()).hexdigest()


def test_doit_lock_pins_the_requirements_and_their_dependencies_by_sha256(env, tmp_path):
    lock = json.loads((env.project / "locks" / "runtime" / "cextrt.lock.json").read_text())
    assert lock["requires"] == ["python-dateutil==2.9.0.post0"] and lock["lock"] == "toolchain"
    assert sorted(lock["entries"]) == ["pypi:python-dateutil", "pypi:six"]  # six: its dependency
    six = lock["entries"]["pypi:six"]
    assert six["filename"] == f"six-{six['version']}-py2.py3-none-any.whl"
    assert six["sha256"] == downloaded_sha256(tmp_path, f"six=={six['version']}")
    # Nothing the toolchain's lock already installs (torch, its dependencies) is pinned again.
    toolchain = json.loads((env.project / "locks" / "toolchain.lock.json").read_text())["entries"]
    assert not set(lock["entries"]) & set(toolchain)
    again = env.doit("lock", "recipe=cextrt", "check=1")
    assert again.returncode == 0 and "unchanged" in again.output, again.output


def test_after_a_switch_the_requirements_import_with_nothing_by_hand(env):
    res = env.doit("switch", "recipe=cextrt")
    assert res.returncode == 0, res.output
    [art] = (env.store / "store").glob("*-cextrt-relwithdebinfo")
    site = art / "runtime" / "site-packages"
    assert (site / "six.py").is_file() and (site / "dateutil" / "__init__.py").is_file()
    manifest = json.loads((art / "manifest.json").read_text())
    assert set(manifest["derivation"]["runtime"]) == {"pypi:python-dateutil", "pypi:six"}
    assert "runtime/site-packages/six.py" in {f["path"] for f in manifest["files"]}
    out = env.python(IMPORTS)
    assert out.returncode == 0, out.stderr
    version, six_version, where = out.stdout.split()
    assert version == "2.9.0.post0"
    assert where == f"{env.workspace}/.orch/profile/runtime/site-packages/dateutil/__init__.py"
    # `doit run` (an artifact's own environment, no switch) finds them in the entry too.
    run = env.doit("run", "recipe=cextrt", "--", "python", "-c", IMPORTS)
    assert run.returncode == 0, run.output
    assert f"{art}/runtime/site-packages/dateutil/__init__.py" in run.stdout
    # The toolchain's python alone does not have them: the entry is what provides them.
    bare = subprocess.run([str(env.workspace / ".orch/toolchain/venv/bin/python"), "-c",
                           "import dateutil"], capture_output=True, text=True)
    assert bare.returncode == 1 and "No module named 'dateutil'" in bare.stderr
    # gc drops the cached install (the entry keeps its own copy: the import still works);
    # a dead build's half-made one goes too, a live build's (its lock held) stays.
    [cached] = (env.store / "cache" / "runtime").iterdir()
    dead = env.store / "cache" / "runtime" / f"{cached.name}.tmp-999999999-0123abcd"
    dead.mkdir()
    gc = run_doit(env.project, "gc", f"store={env.store}", f"workspace={env.workspace}")
    assert gc.returncode == 0, gc.output
    assert "runtime install" in gc.output
    assert list((env.store / "cache" / "runtime").iterdir()) == []
    again = env.python(IMPORTS)
    assert again.returncode == 0 and again.stdout == out.stdout, again.stderr
    # `doit verify` re-hashes them with the entry: a changed one fails it, named.
    assert env.doit("verify", "recipe=cextrt", f"workspace={env.workspace}").returncode == 0
    (site / "six.py").chmod(0o644)
    with open(site / "six.py", "a") as f:
        f.write("# changed after the commit\n")
    bad = env.doit("verify", "recipe=cextrt", f"workspace={env.workspace}")
    assert bad.returncode == 1 and "runtime/site-packages/six.py changed" in bad.output, bad.output


def test_a_changed_requirement_without_doit_lock_is_one_line_and_builds_nothing(env):
    env.write('"python-dateutil==2.8.2"')
    try:
        before = sorted(p.name for p in (env.store / "store").iterdir())
        res = env.doit("build", "recipe=cextrt")
        assert res.returncode == 2, res.output
        assert "cextrt.lock.json is stale: [runtime] requires of recipes/cextrt.toml changed" \
            in res.output and "doit lock recipe=cextrt" in res.output
        assert "Traceback" not in res.output
        assert sorted(p.name for p in (env.store / "store").iterdir()) == before
    finally:
        env.write(DATEUTIL)


@pytest.mark.parametrize("requires,message", [
    ('"six @ https://example.org/six.whl"', "no URL"),
    ('"six", "Six>1"', "'six' is required twice"),
    ('"not a requirement!"', "is not a requirement"),
])
def test_a_bad_requirement_is_one_line_exit_2(env, requires, message):
    env.write(requires)
    try:
        res = env.doit("build", "recipe=cextrt")
        assert res.returncode == 2, res.output
        assert message in res.output and "runtime.requires" in res.output, res.output
        assert "Traceback" not in res.output
    finally:
        env.write(DATEUTIL)
