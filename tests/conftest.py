"""Shared fixtures: a throwaway copy of the project, stores sharing one real toolchain,
and a `doit` runner that drives the real command line."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from filelock import FileLock

REPO = Path(__file__).resolve().parents[1]


@dataclass
class DoitResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_doit(project: Path, *args: str, env: dict[str, str] | None = None,
             timeout: float = 600) -> DoitResult:
    """Run the real `doit` on project/dodo.py, as a user would."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("ORCH_STORE", "MAX_JOBS")}
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "doit", "-f", str(project / "dodo.py"), *args],
                          cwd=project, env=full_env, capture_output=True, text=True,
                          timeout=timeout)
    return DoitResult(proc.returncode, proc.stdout, proc.stderr)


def copy_project(dest: Path) -> Path:
    """dodo.py, recipes/ and locks/ of this repo: enough to run every verb."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REPO / "dodo.py", dest / "dodo.py")
    for d in ("recipes", "locks"):
        shutil.copytree(REPO / d, dest / d, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    if (REPO / "cache.toml").exists():
        shutil.copy2(REPO / "cache.toml", dest / "cache.toml")
    return dest


# Toolchains the set-up materializes once per machine (bootstrap.sh), into a store of their own
# under MACHINE_TOOLCHAINS: the CUDA torch lock's is ~5.6 GB from ~3.8 GB of wheels (two minutes
# of a test worker). Its directory is named by the lock's content hash, so a changed lock is a
# new directory, materialized here on first use; `doit toolchain` on a present one only checks it.
MACHINE_TOOLCHAIN_LOCKS = frozenset({"cuda13-torch"})
MACHINE_TOOLCHAINS = Path(os.environ.get("ORCH_TEST_TOOLCHAINS",
                                         Path.home() / ".cache/orchestrator/test-toolchains"))


def shared_toolchain(tmp_path_factory, lock: str) -> Path:
    """One real materialized toolchain of locks/<lock>.toml for the whole run, shared by the
    pytest-xdist workers: the first one makes it under the run's common temp dir, the
    others wait on the file lock and reuse it (MACHINE_TOOLCHAIN_LOCKS: the machine's store)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # one basetemp per worker; their parent is the run's
    store = shared / ("toolchain-store" if lock == "toolchain" else f"toolchain-store-{lock}")
    if lock in MACHINE_TOOLCHAIN_LOCKS:
        shared = MACHINE_TOOLCHAINS
        shared.mkdir(parents=True, exist_ok=True)
        store = shared / lock
        with FileLock(str(shared / f"{lock}.lock")):
            res = run_doit(REPO, "toolchain", f"lock={lock}", f"store={store}")
            assert res.returncode == 0, res.output
        from orchestrator.lock.files import load_lock
        from orchestrator.toolchain.materialize import toolchain_hash
        return store / "toolchains" / toolchain_hash(load_lock(REPO / "locks", lock))
    with FileLock(str(shared / f"{store.name}.lock")):
        if not (store / "toolchains").is_dir():
            res = run_doit(REPO, "toolchain", f"lock={lock}", f"store={store}")
            assert res.returncode == 0, res.output
    [tc] = [d for d in (store / "toolchains").iterdir() if d.is_dir()]
    return tc


@pytest.fixture(scope="session")
def session_toolchain(tmp_path_factory) -> Path:
    """The default toolchain (locks/toolchain.toml: venv + lldb debs)."""
    return shared_toolchain(tmp_path_factory, "toolchain")


@pytest.fixture(scope="session")
def session_cuda_toolchain(tmp_path_factory) -> Path:
    """The CUDA toolchain (locks/cuda13.toml: the toolkit from its wheels), for cudademo."""
    return shared_toolchain(tmp_path_factory, "cuda13")


@pytest.fixture(scope="session")
def cuda12_toolchain(tmp_path_factory) -> Path:
    """CUDA 12.4 (locks/cuda12.toml: Debian's non-free packages, cuda-gdb 12.4), for cudademo12."""
    return shared_toolchain(tmp_path_factory, "cuda12")


def make_store(root: Path, *toolchains: Path) -> Path:
    """A fresh store that reuses the session's toolchains (same locks, same hashes)."""
    (root / "toolchains").mkdir(parents=True, exist_ok=True)
    for toolchain in toolchains:
        os.symlink(toolchain, root / "toolchains" / toolchain.name)
    return root


@pytest.fixture
def project(tmp_path) -> Path:
    return copy_project(tmp_path / "project")


@pytest.fixture
def store(tmp_path, session_toolchain) -> Path:
    return make_store(tmp_path / "store", session_toolchain)


@pytest.fixture
def doit(project, store):
    """doit(*args) on the test's project copy and store (substitutes off unless asked)."""

    def call(*args: str, env: dict[str, str] | None = None) -> DoitResult:
        extra = [] if any(a.startswith("store=") for a in args) else [f"store={store}"]
        if not any(a.startswith("substitute=") for a in args) and args and args[0] in ("build", "switch"):
            extra.append("substitute=0")
        return run_doit(project, *args, *extra, env=env)

    return call


# The files that take minutes run first, so that the two xdist workers end together instead
# of one of them finishing a PyTorch build alone at the end (measured with --durations).
# test_lock_check and test_toolchain_relocated mostly wait (on the package index, on I/O):
# early, they overlap the other worker's compiles.
SLOW_FILES_FIRST = ("test_pytorch_build.py", "test_pytorch2_cuda.py", "test_cuda_torch_ext.py",
                    "test_lock_check.py", "test_pytorch2_build.py",
                    "test_torchsort_sdist.py",
                    "test_toolchain_relocated.py", "test_pytorch2_checkout.py",
                    "test_pytorch_workspace.py", "test_pytorch_full_path.py", "test_readme.py")


# `unit` (pytest -m unit: seconds, no toolchain, no build, no server) or `e2e` (real cmake,
# ninja, gcc, pip, lldb, nginx, registries, buildbot). A test is e2e when it asks for a
# fixture below (or one of its fixtures does) or lives in a file below, whose tests run
# real components from their own bodies.
E2E_FIXTURES = frozenset({"session_toolchain", "session_cuda_toolchain", "cuda12_toolchain", "cuda_torch_toolchain",
                          "store", "doit", "project"})
E2E_FILES = frozenset({
    "test_bootstrap.py", "test_readme.py", "test_debugging_doc.py", "test_lock_check.py",
    "test_lock_toolchain.py", "test_head_start.py", "test_plan_memo.py", "test_memo_toolchain.py",
    # servers (nginx, registries, stalled sockets), compilers or doit runs in the tests' bodies
    "test_leftovers.py", "test_pytorch2_checkout.py", "test_bad_input_generated.py",
    "test_pytorch_frontend.py", "test_pytorch_full_path.py", "test_toolchain_integrity.py",
    "test_cache_packs.py", "test_deadlines.py", "test_cache_oci.py", "test_cli_help.py",
    "test_hostile_records.py", "test_cache_backends.py", "test_output.py", "test_compile_cache.py",
    "test_verify_elf.py", "test_cache_check.py", "test_bad_input_classes.py",
    "test_wheel_progress.py", "test_clean_stale_race.py", "test_static_checks.py",
    "test_cuda12_toolkit.py",  # the pool fetch: a real download from the suite's mirror
})


def is_e2e(item: pytest.Item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    return bool(names & E2E_FIXTURES) or item.path.name in E2E_FILES \
        or item.get_closest_marker("pytorch") is not None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test marked unit or e2e; slow files first, each file's own order kept (a stable
    sort)."""
    for item in items:
        item.add_marker(pytest.mark.e2e if is_e2e(item) else pytest.mark.unit)

    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return SLOW_FILES_FIRST.index(name) if name in SLOW_FILES_FIRST else len(SLOW_FILES_FIRST)
    items.sort(key=rank)
