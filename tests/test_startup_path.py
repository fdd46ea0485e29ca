"""The no-op build's and the switch's start-up (issue 12): probe answers remembered in the
store until the probed file changes, the caches never reach an artifact id, and what the
two commands no longer import."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.errors import UserError
from orchestrator.hashing import StatCache
from orchestrator.lock import probe
from orchestrator.lock.probe import DPKG_STATUS, probe_compiler, probe_syspkg
from orchestrator.lock.probe_cache import ProbeCache
from orchestrator.model.lock import Lock
from orchestrator.toolchain.machine_check import check_machine


def test_an_answer_is_remembered_until_its_file_changes(tmp_path: Path) -> None:
    binary = tmp_path / "tool"
    binary.write_bytes(b"one")
    asked: list[str] = []

    def ask() -> str:
        asked.append("x")
        return f"answer {len(asked)}"

    cache = ProbeCache(tmp_path / "probes.json")
    assert cache.answer(str(binary), "--version", ask) == "answer 1"
    assert cache.answer(str(binary), "--version", ask) == "answer 1"
    cache.save()
    again = ProbeCache(tmp_path / "probes.json")  # another process
    assert again.answer(str(binary), "--version", ask) == "answer 1" and len(asked) == 1
    assert again.answer(str(binary), "--help", ask) == "answer 2"  # another question
    st = binary.stat()
    os.utime(binary, ns=(st.st_atime_ns, st.st_mtime_ns + 1))  # touched
    assert again.answer(str(binary), "--version", ask) == "answer 3"
    binary.write_bytes(b"two")  # rewritten
    assert again.answer(str(binary), "--version", ask) == "answer 4"
    replaced = tmp_path / "tool.new"
    replaced.write_bytes(b"two")
    os.utime(replaced, ns=(binary.stat().st_atime_ns, binary.stat().st_mtime_ns))
    os.replace(replaced, binary)  # same size and mtime, another inode
    assert again.answer(str(binary), "--version", ask) == "answer 5"
    link = tmp_path / "cc"
    link.symlink_to(binary)
    assert again.answer(str(link), "--version", ask) == "answer 6"  # run by another name
    other = tmp_path / "other"
    shutil.copy2(binary, other)
    link.unlink()
    link.symlink_to(other)  # the name now runs another file
    assert again.answer(str(link), "--version", ask) == "answer 7"


def test_a_failed_probe_is_never_remembered(tmp_path: Path) -> None:
    binary = tmp_path / "tool"
    binary.write_bytes(b"x")
    cache = ProbeCache(tmp_path / "probes.json")
    answers = iter([None, "works"])
    assert cache.answer(str(binary), "q", lambda: next(answers)) is None
    assert cache.answer(str(binary), "q", lambda: next(answers)) == "works"
    assert cache.answer(str(tmp_path / "missing"), "q", lambda: "asked") == "asked"
    cache.save()
    assert list(json.loads((tmp_path / "probes.json").read_text())) == [f"q\0{binary}"]


@pytest.fixture
def driver(tmp_path: Path) -> Path:
    """A copy of the real gcc driver (a file of its own to touch and replace)."""
    gcc = tmp_path / "bin" / "gcc"
    gcc.parent.mkdir()
    shutil.copy2(os.path.realpath(shutil.which("gcc") or "/usr/bin/gcc"), gcc)
    return gcc


def test_a_driver_is_asked_once_until_it_changes(tmp_path: Path, driver: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[list[str]] = []
    real_run = subprocess.run

    def counting_run(cmd, *a, **kw):  # type: ignore[no-untyped-def]
        asked.append([str(c) for c in cmd])
        return real_run(cmd, *a, **kw)

    entry = probe_compiler("cc", str(driver), pin_programs=True)
    assert entry.programs and "as" in entry.programs  # what the driver runs, pinned
    lock = Lock(name="t", spec_sha256="0" * 64, platform={}, entries={"compiler:cc": entry})
    monkeypatch.setattr(probe.subprocess, "run", counting_run)
    stats = StatCache(tmp_path / "stat.json")
    check_machine(lock, None, stats, probes=ProbeCache(tmp_path / "probes.json"))
    first = len(asked)
    assert first == 4  # --version and -print-prog-name= cc1, as, ld
    check_machine(lock, None, stats, probes=ProbeCache(tmp_path / "probes.json"))
    assert len(asked) == first  # a new process, the same driver: nothing run
    check_machine(lock, None, stats)  # the full check (no caches) always asks
    assert len(asked) == 2 * first
    st = driver.stat()
    os.utime(driver, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    check_machine(lock, None, stats, probes=ProbeCache(tmp_path / "probes.json"))
    assert len(asked) == 3 * first  # touched: asked again (and still the locked driver)
    with open(driver, "ab") as f:
        f.write(b"\0")
    with pytest.raises(UserError, match=r"lock drift: compiler:cc .* sha256"):
        check_machine(lock, None, stats, probes=ProbeCache(tmp_path / "probes.json"))


def test_a_package_answer_follows_dpkgs_database() -> None:
    if not os.path.isfile(DPKG_STATUS):
        pytest.skip("no dpkg database on this machine")
    cache = ProbeCache(Path(os.devnull))
    for name in ("dpkg", "surely-not-a-package-orch"):
        assert probe_syspkg(name, cache) == probe_syspkg(name)
    key = f"dpkg-query dpkg\0{DPKG_STATUS}"
    assert cache.entries[key][-1]["name"] == "dpkg"
    assert not any("surely-not" in k for k in cache.entries)  # not installed: not kept


def plan_json(project: Path, store: Path) -> dict:
    res = subprocess.run([sys.executable, "-m", "doit", "-f", str(project / "dodo.py"), "plan",
                          "format=json", f"store={store}"], cwd=project, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_the_caches_never_reach_the_artifact_id(project: Path, tmp_path: Path) -> None:
    """A plan with cold caches and one with every answer remembered give the same id; the
    derivation's inputs are the lock's digests, never what a probe printed."""
    from orchestrator.lock.files import load_lock
    from orchestrator.model.recipe import load_recipe
    from orchestrator.plan.derivation import used_keys

    store = tmp_path / "store"
    cold = plan_json(project, store)
    assert (store / "cache" / "machine-probe-cache.json").is_file()
    warm = plan_json(project, store)
    assert cold["id"] == warm["id"] and cold["derivation"] == warm["derivation"]
    recipe = load_recipe(project / "recipes", "demo")
    lock = load_lock(project / "locks", recipe.lock)
    assert cold["derivation"]["inputs"] == {k: lock.entries[k].digest() for k in used_keys(recipe)}


# Runs doit in this process, as the command line does, then prints the modules it loaded.
MODULES_AFTER = """
import json, runpy, sys
sys.argv = ["doit", *sys.argv[1:]]
try:
    runpy.run_module("doit", run_name="__main__")
except SystemExit as e:
    code = e.code
print(json.dumps({"exit": code, "modules": sorted(sys.modules)}))
"""
# Not needed when nothing is built: the cache's transfer and signing stack, the network,
# the ELF readers, the builders, the cross-process file lock.
NOT_ON_THE_NO_OP_PATH = ("nacl", "requests", "elftools", "http.client", "ssl", "filelock",
                         "orchestrator.builders.compile_cache.remote", "orchestrator.cache.pull",
                         "orchestrator.verify", "orchestrator.realise.build_step",
                         "orchestrator.builders.cmake_steps", "orchestrator.cache.signing")


def modules_of(project: Path, *args: str) -> set[str]:
    res = subprocess.run([sys.executable, "-c", MODULES_AFTER, "-f", str(project / "dodo.py"),
                          *args], cwd=project, capture_output=True, text=True, timeout=600)
    data = json.loads(res.stdout.strip().splitlines()[-1])
    assert data["exit"] in (0, None), res.stderr
    return set(data["modules"])


def test_no_op_build_and_switch_leave_heavy_modules_unimported(doit, project: Path,
                                                               store: Path, tmp_path: Path) -> None:
    assert doit("build").returncode == 0
    ws = tmp_path / "ws"
    ws.mkdir()
    for args in (("build", f"store={store}"),
                 ("switch", f"store={store}", f"workspace={ws}", "substitute=0")):
        loaded = modules_of(project, *args)
        assert "orchestrator.realise.pipeline" in loaded
        heavy = sorted(m for m in loaded if m.split(".")[0] in NOT_ON_THE_NO_OP_PATH
                       or any(m == n or m.startswith(n + ".") for n in NOT_ON_THE_NO_OP_PATH))
        assert not heavy, (args[0], heavy)


def test_no_op_build_and_switch_write_nothing_they_do_not_need(doit, project: Path,
                                                                tmp_path: Path) -> None:
    """doit's dependency DB stays in memory (no sqlite file, no fdatasync per command); a
    switch rewrites the workspace's link state only when it changes (no fsync per switch)."""
    assert doit("build").returncode == 0
    assert doit("build").returncode == 0
    assert (project / ".orch").is_dir() and not list((project / ".orch").glob("doit.sqlite3*"))
    ws = tmp_path / "ws"
    ws.mkdir()
    assert doit("switch", f"workspace={ws}").returncode == 0
    state = ws / ".orch" / "workspace-links.json"
    before = state.stat()
    for variant in ("release", "relwithdebinfo"):
        res = doit("switch", f"workspace={ws}", f"variant={variant}")
        assert res.returncode == 0, res.output
    after = state.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert state.read_text() == "[]\n"


def test_a_build_imports_only_its_own_builder(doit, project: Path, store: Path,
                                              tmp_path: Path) -> None:
    """The builders are imported on first use (builders.registry): an incremental cmake build
    of a developer checkout loads the cmake builder and none of the other three."""
    src = tmp_path / "checkout"
    shutil.copytree(project / "recipes" / "demo", src)
    assert doit("build", f"source={src}", "substitute=0").returncode == 0
    kernel = src / "ops" / "add_kernel.cpp"
    kernel.write_text(kernel.read_text() + "\nint orch_edit_marker() { return 1; }\n")
    loaded = modules_of(project, "build", f"source={src}", "substitute=0", f"store={store}")
    assert "orchestrator.builders.cmake" in loaded
    others = {"orchestrator.builders.pytorch", "orchestrator.builders.setuptools",
              "orchestrator.builders.pep517"}
    assert not loaded & others, sorted(loaded & others)
