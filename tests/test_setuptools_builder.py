"""build.system = "setuptools" end to end: a plain C extension and a torch.utils.cpp_extension
extension, built by the real setuptools/pip/ninja against the locked torch wheel, offline."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import DoitResult, copy_project, make_store, run_doit

WORKSPACE_VERBS = ("verify", "switch", "rollback", "status", "gc", "vscode")


class Env:
    """One project copy + store + workspace for this module; builds are shared."""

    def __init__(self, root: Path, toolchain: Path) -> None:
        self.project = copy_project(root / "project")
        self.store = make_store(root / "store", toolchain)
        self.workspace = root / "ws"
        self.workspace.mkdir()

    def doit(self, *args: str) -> DoitResult:
        extra = [f"store={self.store}"]
        if args[0] in WORKSPACE_VERBS:
            extra.append(f"workspace={self.workspace}")
        if args[0] in ("build", "switch"):
            extra.append("substitute=0")
        return run_doit(self.project, *args, *extra)

    def build(self, recipe: str, variant: str = "relwithdebinfo", *more: str) -> DoitResult:
        return self.doit("build", f"recipe={recipe}", f"variant={variant}", *more)

    def artifact(self, recipe: str, variant: str = "relwithdebinfo") -> Path | None:
        found = sorted((self.store / "store").glob(f"*-{recipe}-{variant}"))
        return found[0] if found else None

    def python(self, code: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", f". '{self.workspace}/.orch/env.sh' && python -c '{code}'"],
                              capture_output=True, text=True,
                              env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")})


@pytest.fixture(scope="module")
def env(tmp_path_factory, session_toolchain) -> Env:
    return Env(tmp_path_factory.mktemp("setuptools"), session_toolchain)


def compile_lines(artifact: Path, source: str) -> list[str]:
    log = (artifact / "meta" / "build.log").read_text()
    return [ln for ln in log.splitlines() if " -c " in ln and source in ln]


def producers(artifact: Path, so: str) -> list[str]:
    report = json.loads((artifact / "meta" / "verify.json").read_text())
    return report["files"][so]["producers"]


CEXT_SO = "prefix/python/cext/_speed.cpython-311-x86_64-linux-gnu.so"


@pytest.mark.parametrize("variant,opt,debug", [("relwithdebinfo", "-O2", True),
                                               ("release", "-O3", False),
                                               ("debug", "-O0", True)])
def test_c_extension_variant_reaches_the_compile_line(env, variant, opt, debug):
    res = env.build("cext", variant)
    assert res.returncode == 0, res.output
    art = env.artifact("cext", variant)
    [line] = compile_lines(art, "csrc/speed.c")
    flags = line.split()
    assert opt in flags and ("-g" in flags) is debug, line
    # Nothing of the interpreter's own -g -O2, the prefix maps are there.
    assert [f for f in flags if f.startswith("-O")] == [opt], line
    assert "-ffile-prefix-map=" in line and "=/orch/src/cext" in line
    report = json.loads((art / "meta" / "verify.json").read_text())
    assert report["ok"], report["findings"]
    assert report["files"][CEXT_SO]["debug_info"] is debug
    # The checkout is never written: no build/, no egg-info next to setup.py.
    assert sorted(p.name for p in (env.project / "recipes" / "cext").iterdir()) == \
        ["cext", "csrc", "setup.py"]


def test_c_extension_imports_and_runs_after_switch(env):
    assert env.build("cext").returncode == 0
    sw = env.doit("switch", "recipe=cext")
    assert sw.returncode == 0, sw.output
    out = env.python("import cext; print(cext.dot([1.0, 2.0], [3.0, 4.0]))")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "11.0"


def test_cpp_extension_builds_with_ninja_verifies_and_runs(env):
    res = env.build("cppext")
    assert res.returncode == 0, res.output
    art = env.artifact("cppext")
    so = "prefix/python/cppext/_C.cpython-311-x86_64-linux-gnu.so"
    assert (art / so).is_file()
    log = (art / "meta" / "build.log").read_text()
    assert re.search(r"^\s*\[1/1\] .*g\+\+ .*-O2 -g .*csrc/scale\.cpp", log, re.M), log[-3000:]
    assert (art / "meta" / "ninja_log").is_file()
    assert any("-O2" in p and " -g" in p for p in producers(art, so))
    sw = env.doit("switch", "recipe=cppext")
    assert sw.returncode == 0, sw.output
    ver = env.doit("verify", "recipe=cppext")
    assert ver.returncode == 0, ver.output
    out = env.python("import torch, cppext; print(cppext.scale(torch.arange(3.0), 2.0).tolist())")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[0.0, 2.0, 4.0]"


def test_cpp_extension_old_abi_fails_verify_naming_a_c10_symbol(env):
    res = env.build("cppext", "abi0")
    assert res.returncode == 1, res.output
    assert env.artifact("cppext", "abi0") is None
    [kept] = sorted((env.store / "tmp").glob("failed-*-cppext-abi0"))
    report = json.loads((kept / "meta" / "verify.json").read_text())
    [abi] = [f for f in report["findings"] if f["check"] == "cxx_abi" and f["severity"] == "fail"]
    assert "_GLIBCXX_USE_CXX11_ABI=0" in abi["cause"] and "c10::" in abi["cause"]


def write_recipe(project: Path, name: str, files: dict[str, str], uses: str = "") -> None:
    (project / "recipes" / f"{name}.toml").write_text(
        f'[source]\nkind = "path"\npath = "{name}"\n\n[build]\nsystem = "setuptools"\n{uses}\n'
        '[variants.relwithdebinfo]\nbuild_type = "RelWithDebInfo"\n')
    for rel, text in files.items():
        p = project / "recipes" / name / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def assert_bad_input(env: Env, res: DoitResult, *words: str) -> None:
    assert res.returncode == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    for w in words:
        assert w in lines[0], lines[0]


def test_missing_build_requirement_is_bad_input(env):
    write_recipe(env.project, "needsx", {
        "pyproject.toml": '[build-system]\nrequires = ["setuptools", "not-a-locked-pkg>=1"]\n'
                          'build-backend = "setuptools.build_meta"\n',
        "setup.py": "from setuptools import setup\nsetup(name='needsx', version='0')\n"})
    res = env.build("needsx")
    assert_bad_input(env, res, "recipes/needsx.toml", "not-a-locked-pkg", "locks/toolchain.toml")
    assert env.artifact("needsx") is None


def test_setup_py_that_downloads_is_bad_input(env):
    write_recipe(env.project, "fetcher", {
        "setup.py": "from setuptools import setup\n"
                    "setup(name='fetcher', version='0', setup_requires=['left-pad-nowhere'])\n"})
    res = env.build("fetcher")
    assert_bad_input(env, res, "recipes/fetcher.toml", "download", "doit lock")
    assert env.artifact("fetcher") is None


def test_unlisted_build_requirement_must_be_in_uses(env):
    write_recipe(env.project, "unlisted", {
        "pyproject.toml": '[build-system]\nrequires = ["setuptools", "ninja"]\n'
                          'build-backend = "setuptools.build_meta"\n',
        "setup.py": "from setuptools import setup\nsetup(name='unlisted', version='0')\n"})
    res = env.build("unlisted")
    assert_bad_input(env, res, "build.uses", "pypi:ninja")



def test_a_failed_build_keeps_its_log_until_gc(env):
    write_recipe(env.project, "broken", {
        "setup.py": "from setuptools import Extension, setup\n"
                    "setup(name='broken', version='0', ext_modules=[Extension('broken', ['b.c'])])\n",
        "b.c": "int broken(void) { return missing_symbol_here; }\n"})
    res = env.build("broken")
    assert res.returncode == 1, res.output
    m = re.search(r"full log: (\S+build\.log)", res.output.replace("\n", ""))
    assert m, res.output
    log = Path(m[1])
    assert log.is_file() and "missing_symbol_here" in log.read_text()
    assert log.parent.parent.name.startswith("failed-") and log.parent.parent.name.endswith("-broken-relwithdebinfo")
    tree = re.search(r"the build tree is kept in (\S+)", res.output.replace("\n", ""))
    assert tree and Path(tree[1]).is_dir()
    assert env.artifact("broken") is None
    gc = env.doit("gc")
    assert gc.returncode == 0, gc.output
    assert not log.exists()


def push_then_switch_in_a_fresh_store(env: Env, tmp_path: Path, toolchain: Path,
                                      recipe: str) -> Path:
    """Push the recipe's artifact to a file:// cache, signed; a teammate's empty store and
    workspace get it by `doit switch` (substituted, not built). Returns that workspace."""
    assert env.build(recipe).returncode == 0
    keys, cache = tmp_path / "keys", tmp_path / "cache"
    cache.mkdir()
    base = {"ORCH_CACHE_KEY_DIR": str(keys), "ORCH_NO_PROGRESS": "1"}
    gen = run_doit(env.project, "cache-keygen", "name=team-1", env=base)
    assert gen.returncode == 0, gen.output
    public = gen.stdout.strip().splitlines()[-1]
    config = tmp_path / "cache.toml"
    config.write_text(f'[cache]\nsubstituters = ["{cache.as_uri()}/"]\ntrusted-keys = ["{public}"]\n')
    cfg = {**base, "ORCH_CACHE_CONFIG": str(config)}
    push = run_doit(env.project, "push", f"recipe={recipe}", f"store={env.store}",
                    env={**cfg, "ORCH_CACHE_SIGNING_KEY": str(keys / "team-1.secret")})
    assert push.returncode == 0, push.output
    mate = make_store(tmp_path / "B", toolchain)
    ws = tmp_path / "ws-b"
    ws.mkdir()
    pull = run_doit(env.project, "switch", f"recipe={recipe}", f"store={mate}", f"workspace={ws}",
                    env=cfg)
    assert pull.returncode == 0, pull.output
    assert "substituted" in pull.output or "pulled" in pull.output, pull.output
    assert list((mate / "store").glob(f"*-{recipe}-relwithdebinfo"))
    return ws


def python_in(ws: Path, code: str) -> str:
    out = subprocess.run(["bash", "-c", f". '{ws}/.orch/env.sh' && python -c '{code}'"],
                         capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")})
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_cpp_extension_push_pull_into_a_fresh_store(env, tmp_path, session_toolchain):
    """Everyone's download: push to a file:// cache, a teammate pulls into an empty store."""
    ws = push_then_switch_in_a_fresh_store(env, tmp_path, session_toolchain, "cppext")
    code = "import torch, cppext; print(cppext.scale(torch.ones(2), 5.0).tolist())"
    assert python_in(ws, code) == "[5.0, 5.0]"


def test_scikit_build_core_project_push_pull_into_a_fresh_store(env, tmp_path, session_toolchain):
    ws = push_then_switch_in_a_fresh_store(env, tmp_path, session_toolchain, "skbext")
    assert python_in(ws, "import skbext; print(skbext.triple(14))") == "42"


def test_find_package_torch_project_push_pull_into_a_fresh_store(env, tmp_path, session_toolchain):
    ws = push_then_switch_in_a_fresh_store(env, tmp_path, session_toolchain, "findtorch")
    lib = ws / ".orch/profile/prefix/lib/libfindtorch.so"
    assert lib.is_file()
    verify = run_doit(env.project, "verify", f"workspace={ws}",
                      f"store={ws.parent / 'B'}")
    assert verify.returncode == 0, verify.output
