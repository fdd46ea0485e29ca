"""builders/bytecode.py with the real interpreter: every module of an artifact's Python
packages gets a hash-checked .pyc that the interpreter loads instead of compiling the source
(the store is read-only and workspaces set PYTHONDONTWRITEBYTECODE), compiled once per
source in the build tree's cache, and never trusted over a changed source."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from orchestrator.builders import bytecode

TAG = sys.implementation.cache_tag


def package(prefix: Path) -> Path:
    pkg = prefix / "python" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("VALUE = 1\n")
    (pkg / "mod.py").write_text("def answer():\n    return 42\n")
    (pkg / "template.py").write_text("def broken(:\n")  # not Python: no .pyc, no failure
    (prefix / "include").mkdir()
    (prefix / "include" / "gen.py").write_text("X = 1\n")  # not under outputs.python
    os.symlink("../../include", pkg / "include")  # a linked tree is not walked
    return pkg


def loads(prefix: Path, module: str, code: str = "") -> subprocess.CompletedProcess[str]:
    """`python -v` in a workspace's environment: stderr says where each module's code came from."""
    env = {**os.environ, "PYTHONPATH": str(prefix / "python"), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-v", "-c", f"import {module}; {code}"],
                          capture_output=True, text=True, env=env)


def test_every_module_gets_a_hash_checked_pyc_the_interpreter_loads(tmp_path: Path) -> None:
    prefix, cache = tmp_path / "prefix", tmp_path / "build" / bytecode.CACHE
    pkg = package(prefix)
    counts = bytecode.compile_packages(prefix, ["python"], Path(sys.executable), cache, jobs=2)
    assert counts == {"compiled": 2, "cached": 0, "kept": 0, "failed": 1}
    pycs = sorted(p.name for p in (pkg / "__pycache__").iterdir())
    assert pycs == [f"__init__.{TAG}.pyc", f"mod.{TAG}.pyc"]
    assert (pkg / "__pycache__" / f"mod.{TAG}.pyc").read_bytes()[4:8] == b"\x03\0\0\0"  # checked hash
    assert not (prefix / "include" / "__pycache__").exists()
    run = loads(prefix, "pkg.mod", "print(pkg.mod.answer())")
    assert run.stdout.strip() == "42"
    assert f"code object from '{pkg}/__pycache__/mod.{TAG}.pyc'" in run.stderr


def test_the_build_trees_cache_gives_the_same_bytes_and_compiles_only_what_changed(tmp_path: Path) -> None:
    cache = tmp_path / "build" / bytecode.CACHE
    first, second = tmp_path / "stage1", tmp_path / "stage2"
    package(first)
    bytecode.compile_packages(first, ["python"], Path(sys.executable), cache, jobs=1)
    pkg = package(second)
    (pkg / "mod.py").write_text("def answer():\n    return 43\n")
    counts = bytecode.compile_packages(second, ["python"], Path(sys.executable), cache, jobs=1)
    assert counts == {"compiled": 1, "cached": 1, "kept": 0, "failed": 1}
    same = f"python/pkg/__pycache__/__init__.{TAG}.pyc"
    assert (first / same).read_bytes() == (second / same).read_bytes()
    assert loads(second, "pkg.mod", "print(pkg.mod.answer())").stdout.strip() == "43"
    assert not list(cache.rglob("*.tmp-*"))  # every entry renamed into place


def test_a_pyc_is_never_trusted_over_a_changed_source(tmp_path: Path) -> None:
    """An mtime-checked .pyc would be taken for a source edited to the same size under the
    same mtime (as a store's normalized mtimes make likely); a hash-checked one is not."""
    prefix = tmp_path / "prefix"
    pkg = package(prefix)
    bytecode.compile_packages(prefix, ["python"], Path(sys.executable), tmp_path / "c", jobs=1)
    mod = pkg / "mod.py"
    st = mod.stat()
    mod.write_text("def answer():\n    return 24\n")  # the same size
    os.utime(mod, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert loads(prefix, "pkg.mod", "print(pkg.mod.answer())").stdout.strip() == "24"


def test_a_pip_installed_pyc_is_kept(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    pkg = package(prefix)
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / f"mod.{TAG}.pyc").write_bytes(b"pip's")
    counts = bytecode.compile_packages(prefix, ["python"], Path(sys.executable), tmp_path / "c", jobs=1)
    assert counts["kept"] == 1 and (pkg / "__pycache__" / f"mod.{TAG}.pyc").read_bytes() == b"pip's"
