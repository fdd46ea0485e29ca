"""Materialize a lock into <store>/toolchains/<hash>/: a venv and unpacked Debian packages.

No root, no change to the system: the venv comes from the locked interpreter with every
package installed by hash (--require-hashes --no-deps); Debian packages are downloaded,
checked against the lock's sha256 and unpacked with dpkg-deb -x (never installed). The
directory appears by one rename once complete; a re-run finds toolchain.json and returns.
"""
from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.console import console, step
from orchestrator.errors import CheckFailed, UserError, is_no_space, no_space
from orchestrator.fs import remove_tree, temp_in, write_atomic
from orchestrator.hashing import pretty_json
from orchestrator.model.lock import CompilerEntry, Lock, PypiEntry, PythonEntry
from orchestrator.model.store_layout import TOOLCHAIN_JSON, StorePaths
from orchestrator.store import tree_manifest
from orchestrator.store.artifacts import Store
from orchestrator.toolchain import cuda_toolkit, debugger_env
from orchestrator.toolchain.machine_check import check_interpreter, check_machine

# Every file the materialization wrote (tree_manifest): checked cheaply at each use.
FILES_MANIFEST = "toolchain-files.json"
# What a build may see of the machine: the toolchain first, then the base system, which is
# Debian's (its packages, the lock's compilers). Not /usr/local: what a machine keeps there is
# in no lock, and a setup.py that probes for it (`nvcc` on PATH → a CUDA extension) would
# build something else on each machine (a CUDA toolkit comes from the lock: bin_dirs).
BASE_PATH = ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]
# (store, lock, final dir) -> a line saying where it came from, or None: build it here.
# Given by a higher layer (cache.toolchain_hook); it must leave nothing at `final` on None.
Substituter = Callable[[Store, Lock, Path], str | None]


@dataclass
class Toolchain:
    root: Path
    lock: Lock

    @property
    def venv(self) -> Path:
        return self.root / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def cmake(self) -> Path:
        return self.venv / "bin" / "cmake"

    @property
    def ninja(self) -> Path:
        return self.venv / "bin" / "ninja"

    @property
    def deb_root(self) -> Path:
        return self.root / "debs" / "root"

    def _compiler(self, name: str) -> Path | None:
        e = self.lock.entries.get(f"compiler:{name}")
        return Path(e.path) if isinstance(e, CompilerEntry) else None

    @property
    def cc(self) -> Path:
        return self._compiler("cc") or Path("/usr/bin/cc")

    @property
    def cxx(self) -> Path:
        return self._compiler("cxx") or Path("/usr/bin/c++")

    @property
    def cuda_root(self) -> Path | None:
        """The locked CUDA toolkit's root (`cuda:toolkit`, see cuda_toolkit), or None."""
        return self.root / cuda_toolkit.CUDA_LINK if cuda_toolkit.toolkit_entry(self.lock) else None

    @property
    def nvcc(self) -> Path | None:
        return self.cuda_root / "bin" / "nvcc" if self.cuda_root else self._compiler("nvcc")

    @property
    def cuda_gdb(self) -> Path | None:
        """cuda-gdb of the locked toolkit (`[cuda.gdb]`: CUDA 12.4's, run through its suite's
        loader by the toolkit root's bin/cuda-gdb), or None: no registry carries one for 13."""
        gdb = self.cuda_root / "bin" / "cuda-gdb" if self.cuda_root else None
        return gdb if gdb is not None and gdb.is_file() else None

    @property
    def debugger(self) -> debugger_env.LldbTools | None:
        """The pinned lldb-14 (lldb, lldb-vscode, lldb-server) unpacked from the locked debs."""
        return debugger_env.locate(self.deb_root)

    @property
    def python_entry(self) -> PythonEntry:
        e = self.lock.entries["python"]
        assert isinstance(e, PythonEntry)
        return e

    def info(self) -> dict:
        return json.loads((self.root / TOOLCHAIN_JSON).read_text())

    def site_packages(self) -> Path:
        v = ".".join(self.python_entry.version.split(".")[:2])
        return self.venv / "lib" / f"python{v}" / "site-packages"

    def bin_dirs(self) -> list[Path]:
        dirs = [self.venv / "bin"]
        if self.nvcc is not None:
            dirs.append(self.nvcc.parent)
        return dirs

    def build_env(self) -> dict[str, str]:
        """The whole environment of a build: toolchain + base system, nothing of the user's."""
        env = {
            "PATH": os.pathsep.join([*map(str, self.bin_dirs()), *BASE_PATH]),
            "HOME": os.environ.get("HOME", "/root"),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "VIRTUAL_ENV": str(self.venv),
            "CC": str(self.cc),
            "CXX": str(self.cxx),
            "SOURCE_DATE_EPOCH": "315532800",
        }
        if self.nvcc is not None:
            env["CUDACXX"] = str(self.nvcc)
        if self.cuda_root is not None:  # torch.utils.cpp_extension's and CMake's way to it
            env["CUDA_HOME"] = env["CUDAToolkit_ROOT"] = str(self.cuda_root)
        if "TERM" in os.environ:
            env["TERM"] = os.environ["TERM"]
        return env


def toolchain_hash(lock: Lock) -> str:
    return lock.digest()[:32]


def toolchain_root(store: Store, lock: Lock) -> Path:
    """Where `lock`'s toolchain is materialized in `store` (named only: nothing checked)."""
    return store.toolchains_dir / toolchain_hash(lock)


def verify_toolchain_full(store: Store, lock: Lock) -> Path:
    """The full toolchain check (`doit verify toolchain=1`, check=1): the machine against the
    lock with every pinned file re-hashed, then every file of the materialized toolchain
    re-hashed against its manifest. UserError (drift, exit 2) or CheckFailed (not
    materialized / no manifest, exit 1). Returns the toolchain's root."""
    check_machine(lock)
    root = toolchain_root(store, lock)
    if not root.is_dir():
        raise UserError(f"toolchain {lock.name} is not materialized in {root.parent}; "
                        f"run `doit toolchain lock={lock.name}`")
    if drift(root) is None:
        raise CheckFailed(f"toolchain {root} has no file manifest (materialized by an older "
                          "version); remove it to materialize it again")
    check_toolchain(root, full=True)
    return root


def drift(root: Path, full: bool = False) -> tree_manifest.Changes | None:
    """What changed in a materialized toolchain since it was written (None: no manifest,
    i.e. materialized before manifests existed). `full` re-hashes every file."""
    if not full:  # the quick check's entries from a marshal copy in <store>/cache/
        quick = tree_manifest.read_quick(root, FILES_MANIFEST, StorePaths(root.parent.parent).toolchain_quick)
        return None if quick is None else tree_manifest.quick_check(root, quick)
    entries = tree_manifest.read(root, FILES_MANIFEST)
    if entries is None:
        return None
    return tree_manifest.full_check(root, entries, FILES_MANIFEST)


def check_toolchain(root: Path, full: bool = False) -> None:
    """UserError 'toolchain drift: <file> changed' when a file of the toolchain changed."""
    found = drift(root, full)
    if found:
        n = len(found.changed) + len(found.missing) + len(found.extra)
        more = f" (and {n - 1} more)" if n > 1 else ""
        raise UserError(f"toolchain drift: {root / found.first()}{more}; remove {root} to "
                        "materialize it again from the lock")


def _install_pypi(tmp: Path, lock: Lock, python_exe: str) -> None:
    pkgs = [e for e in lock.entries.values() if isinstance(e, PypiEntry)]
    venv = tmp / "venv"
    made = subprocess.run([python_exe, "-m", "venv", str(venv)], capture_output=True, text=True)
    if made.returncode != 0:
        if is_no_space(made.stderr + made.stdout):
            raise no_space(venv)
        raise UserError(f"making the toolchain's venv failed: {made.stderr.strip()[-200:]}")
    req = tmp / "requirements.txt"
    req.write_text("".join(f"{p.name}=={p.version} --hash=sha256:{p.sha256}\n"
                           for p in sorted(pkgs, key=lambda p: p.name)))
    if not pkgs:
        return
    res = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                          "--no-deps", "--require-hashes", "--only-binary=:all:",
                          "--no-compile", "-r", str(req)], capture_output=True, text=True)
    if res.returncode != 0:
        lines = [ln for ln in res.stderr.splitlines() if ln.strip() and "WARNING" not in ln]
        detail = " ".join(lines[-3:]) if lines else "pip failed"
        if is_no_space(res.stderr):
            raise no_space(venv)
        raise UserError(f"installing the locked Python packages failed: {detail}")


def _install_debs(tmp: Path, lock: Lock) -> None:
    """The locked Debian packages unpacked into <tmp>/debs/root (deb_install: through the
    machine's deb cache), with Debian's lldb-14 links that are wrong outside /usr fixed.
    deb_install (requests, filelock) is imported here: a no-op build only reads toolchains."""
    from orchestrator.toolchain import deb_install

    root = deb_install.install(tmp / "debs", lock)
    if root is not None and debugger_env.locate(root) is not None:
        debugger_env.fixup(root)


def _relocate_venv(venv: Path, old: Path, new: Path) -> None:
    """A venv records its own path in scripts and pyvenv.cfg; rewrite them for the final path."""
    o, n = str(old).encode(), str(new).encode()
    for p in [*venv.joinpath("bin").iterdir(), venv / "pyvenv.cfg"]:
        if p.is_symlink() or not p.is_file():
            continue
        data = p.read_bytes()
        if o in data and b"\0" not in data[:1024]:
            mode = p.stat().st_mode
            p.write_bytes(data.replace(o, n))
            os.chmod(p, mode)


_TORCH_PROBE = ("import json, torch; print(json.dumps({'version': torch.__version__.split('+')[0], "
                "'cxx11_abi': bool(torch._C._GLIBCXX_USE_CXX11_ABI)}))")


def probe_torch(python: Path) -> dict[str, object] | None:
    """{'version', 'cxx11_abi'} of the torch importable by `python`; None if it has none.
    Recorded in toolchain.json under "torch" at materialization (verify.torch_abi reads it)."""
    res = subprocess.run([str(python), "-c", _TORCH_PROBE], capture_output=True, text=True)
    if res.returncode != 0:
        if "No module named 'torch'" in res.stderr:
            return None
        last = (res.stderr.strip().splitlines() or ["import failed"])[-1]
        raise UserError(f"importing torch with {python} failed: {last}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def linked_toolchain(store: Store, lock: Lock) -> Toolchain:
    """The toolchain of `lock` for a command that only links it and runs nothing from it
    (`doit switch`: .orch/toolchain and env.sh name it): the locked interpreter is checked
    and the toolchain must be materialized (ensure_toolchain when it is not), but its ~20k
    files are not lstat()ed. Every command that runs a program from it does that
    (ensure_toolchain: a build, check=1, `doit verify`, `doit vscode`, the bot's smoke tests);
    `doit verify toolchain=1` re-hashes them."""
    final = toolchain_root(store, lock)
    if not isinstance(lock.entries.get("python"), PythonEntry) \
            or not (final / TOOLCHAIN_JSON).is_file():
        return ensure_toolchain(store, lock)
    check_interpreter(lock)
    return Toolchain(final, lock)


def ensure_toolchain(store: Store, lock: Lock, substituter: Substituter | None = None) -> Toolchain:
    """Return the materialized toolchain for this lock, creating it once: from `substituter`
    (a teammate's signed copy) when it can deliver, else from the locked wheels and debs."""
    py = lock.entries.get("python")
    if not isinstance(py, PythonEntry):
        raise UserError(f"lock {lock.name!r} has no python entry; run `doit lock`")
    check_interpreter(lock)
    final = toolchain_root(store, lock)
    if (final / TOOLCHAIN_JSON).is_file():
        check_toolchain(final)
        return Toolchain(final, lock)
    store.ensure()
    with store.lock(f"toolchain-{final.name}"):
        if (final / TOOLCHAIN_JSON).is_file():
            check_toolchain(final)
            return Toolchain(final, lock)
        store.clean_stale()
        if substituter is not None and (origin := substituter(store, lock, final)) is not None:
            check_toolchain(final)
            console.print(origin)
            return Toolchain(final, lock)
        tmp = temp_in(store.toolchains_dir, final.name)
        tmp.mkdir()
        try:
            # Debian packages first: a hash mismatch there is found in seconds.
            with step("toolchain: locked Debian packages (dpkg-deb -x, no root)"):
                _install_debs(tmp, lock)
            with step(f"toolchain {final.name[:12]}: venv from {py.path} + locked wheels"):
                _install_pypi(tmp, lock, py.path)
            _relocate_venv(tmp / "venv", tmp, final)
            facts = {"lock": lock.name, "lock_digest": lock.digest(), "entries": sorted(lock.entries)}
            cuda = cuda_toolkit.assemble(tmp, Toolchain(tmp, lock).site_packages(), lock)
            if cuda is not None:  # the toolkit's layout, in the manifest below
                facts["cuda"] = cuda
            if "pypi:torch" in lock.entries:  # its C++ ABI flag, which builds against it must match
                facts["torch"] = probe_torch(tmp / "venv" / "bin" / "python")
            write_atomic(tmp / TOOLCHAIN_JSON, pretty_json(facts))
            tree_manifest.write(tmp, FILES_MANIFEST)  # last: everything above is in it
            if final.exists():
                remove_tree(final)
            os.rename(tmp, final)
        except BaseException:
            remove_tree(tmp)
            raise
    console.print(f"toolchain ready: {final}")
    return Toolchain(final, lock)
