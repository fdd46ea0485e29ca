"""Run the pinned lldb (Debian lldb-14, python3-lldb-14, liblldb-14 unpacked with
`dpkg-deb -x`, no root) from its deb root: where its programs are, which environment they
need, and the fixups the unpacked tree needs once (dangling or misplaced links)."""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import UserError
from orchestrator.fs import atomic_symlink

LLVM_MAJOR = 14
# What a caller's shell may set that breaks lldb's embedded Python 3.11: it finds its prefix
# through the first `python3` on PATH (an activated venv or pyenv leaves it without `six`,
# then without its own `run_one_line`), and PYTHON* / VIRTUAL_ENV redirect it. Every entry
# point (env(), the .orch/bin wrappers, the launch configurations' adapter) drops these and
# puts the system's /usr/bin first.
LLDB_PYTHON_VARS = ("PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONNOUSERSITE",
                    "PYTHONSAFEPATH", "PYTHONUSERBASE", "PYTHONEXECUTABLE", "PYTHONPLATLIBDIR",
                    "VIRTUAL_ENV", "CONDA_PREFIX", "PYENV_VERSION")
SYSTEM_BIN = ("/usr/bin", "/bin")


def clean_python_env(base: dict[str, str]) -> dict[str, str]:
    """base without the variables that redirect an embedded Python (LLDB_PYTHON_VARS), with
    /usr/bin and /bin first on PATH and the venv's bin directory dropped from it."""
    env = {k: v for k, v in base.items() if k not in LLDB_PYTHON_VARS or k == "PATH"}
    venv = base.get("VIRTUAL_ENV")
    rest = [d for d in base.get("PATH", "").split(":")
            if d and d not in SYSTEM_BIN and not (venv and d == f"{venv}/bin")]
    env["PATH"] = ":".join([*SYSTEM_BIN, *rest])
    return env


@dataclass(frozen=True)
class LldbTools:
    """The pinned lldb inside one deb root (the directory `dpkg-deb -x` unpacked into)."""

    deb_root: Path
    llvm_dir: Path          # <deb_root>/usr/lib/llvm-14
    lib_dir: Path           # <deb_root>/usr/lib/<multiarch>: liblldb-14.so.1
    python_dir: Path        # holds the `lldb` Python package (python3-lldb-14)

    @property
    def lldb(self) -> Path:
        """The command-line debugger."""
        return self.llvm_dir / "bin" / "lldb"

    @property
    def lldb_vscode(self) -> Path:
        """The Debug Adapter Protocol server (VS Code's native adapter)."""
        return self.llvm_dir / "bin" / "lldb-vscode"

    @property
    def lldb_server(self) -> Path:
        """The gdb-remote stub lldb starts to run and trace a process."""
        return self.llvm_dir / "bin" / "lldb-server"

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """`base` (default: os.environ) made independent of the caller's Python
        (clean_python_env) plus what lldb / lldb-vscode need to start rootless:
        LD_LIBRARY_PATH for liblldb-14.so.1 (the executables carry no RUNPATH) and
        LLDB_DEBUGSERVER_PATH for lldb-server."""
        env = clean_python_env(dict(os.environ if base is None else base))
        env["LD_LIBRARY_PATH"] = _prepend(str(self.lib_dir), env.get("LD_LIBRARY_PATH"))
        env["LLDB_DEBUGSERVER_PATH"] = str(self.lldb_server)
        return env

    def python_env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """env() plus PYTHONPATH so that the system Python 3.11 can `import lldb`."""
        env = self.env(base)
        env["PYTHONPATH"] = _prepend(str(self.python_dir), env.get("PYTHONPATH"))
        return env

    def missing_libraries(self) -> list[str]:
        """Shared libraries lldb-vscode needs that this machine lacks (ldd 'not found')."""
        out = subprocess.run(["ldd", str(self.lldb_vscode)], env=self.env(), text=True,
                             capture_output=True, check=False).stdout
        return sorted({m.group(1) for m in re.finditer(r"^\s*(\S+) => not found", out, re.M)})


def _prepend(entry: str, current: str | None) -> str:
    return entry if not current else f"{entry}:{current}"


def locate(deb_root: Path) -> LldbTools | None:
    """The lldb unpacked under deb_root, or None when it is not there."""
    llvm_dir = deb_root / "usr" / "lib" / f"llvm-{LLVM_MAJOR}"
    if not (llvm_dir / "bin" / "lldb-vscode").is_file():
        return None
    libs = sorted((deb_root / "usr" / "lib").glob(f"*-linux-gnu/liblldb-{LLVM_MAJOR}.so.1"))
    pkgs = sorted((llvm_dir / "lib").glob("python3.*/dist-packages/lldb/__init__.py"))
    if not libs or not pkgs:
        return None
    return LldbTools(deb_root=deb_root, llvm_dir=llvm_dir, lib_dir=libs[0].parent,
                     python_dir=pkgs[0].parent.parent)


def require(deb_root: Path) -> LldbTools:
    """locate(), or UserError saying which packages to pin and unpack."""
    tools = locate(deb_root)
    if tools is None:
        raise UserError(f"no lldb-{LLVM_MAJOR} under {deb_root}: the toolchain lock must pin "
                        f"lldb-{LLVM_MAJOR}, liblldb-{LLVM_MAJOR} and python3-lldb-{LLVM_MAJOR}; "
                        "run `doit toolchain`")
    missing = tools.missing_libraries()
    if missing:
        raise UserError(f"lldb-vscode in {deb_root} cannot start, missing {', '.join(missing)}; "
                        f"install them (Debian: libllvm{LLVM_MAJOR} libclang-cpp{LLVM_MAJOR}) "
                        "or pin them in the toolchain lock")
    return tools


def _relink(link: Path, target: Path, root: Path, done: list[str]) -> None:
    """Make `link` a relative symlink to `target` (atomically), noting the change."""
    rel = os.path.relpath(target, link.parent)
    if link.is_symlink() and os.readlink(link) == rel:
        return
    atomic_symlink(rel, link)
    done.append(f"{link.relative_to(root)} -> {rel}")


def fixup(deb_root: Path) -> list[str]:
    """Repair the unpacked tree so lldb works from it; idempotent; returns what changed.

    Call once after `dpkg-deb -x`, before the toolchain is made read-only:
    1. python3-lldb-14's `_lldb.cpython-3X-*.so` points at `../../../../../lib/liblldb.so`
       (only in liblldb-14-dev, and one level off); point it at liblldb-14.so.1 so that a
       plain Python can `import lldb`.
    2. Its `lldb-argdumper` link is off by one level too; point it at llvm-14/bin.
    3. lldb looks for its Python package in `<libdir>/../local/lib/python3.X/dist-packages`
       (Debian's build of 14.0.6 computes that path, `lldb -P` prints it); link it to the
       real dist-packages so the script interpreter and data formatters work without
       PYTHONPATH.
    """
    tools = locate(deb_root)
    if tools is None:
        raise UserError(f"no lldb-{LLVM_MAJOR} under {deb_root}; unpack lldb-{LLVM_MAJOR}, "
                        f"liblldb-{LLVM_MAJOR} and python3-lldb-{LLVM_MAJOR} there first")
    done: list[str] = []
    liblldb = tools.lib_dir / f"liblldb-{LLVM_MAJOR}.so.1"
    pkg = tools.python_dir / "lldb"
    for ext in pkg.glob("_lldb*.so"):
        if ext.is_symlink() and not ext.exists():
            _relink(ext, liblldb, deb_root, done)
    argdumper = pkg / "lldb-argdumper"
    if argdumper.is_symlink() and not argdumper.exists():
        _relink(argdumper, tools.llvm_dir / "bin" / "lldb-argdumper", deb_root, done)
    pyver = tools.python_dir.parent.name            # python3.11
    expected = tools.lib_dir.parent / "local" / "lib" / pyver / "dist-packages"
    if not expected.exists():
        expected.parent.mkdir(parents=True, exist_ok=True)
        _relink(expected, tools.python_dir, deb_root, done)
    return done
