"""Compilers and PATH as a build sees them (issue 33).

- `compiler_wrappers`: for builders whose compiles the orchestrator does not write itself
  (setuptools and torch.utils.cpp_extension, which honour only CC / CXX), one script per
  compiler in `<build tree>/.orch-cc/<kind>/`, named as the compiler (cpp_extension checks
  the name says gcc / g++), that runs it through the build's launcher (ccache, or sccache's
  launcher script). Off: the compilers themselves.
- `build_path`: the build's PATH with the toolchain's own launchers hidden unless the build's
  compile cache is that launcher: the venv's bin/ (where sccache lives when the lock has it)
  is replaced by `<build tree>/.orch-bin/<kind>/`, one forwarding script per other program, so
  no project's own detection (find_program(sccache), ccache auto-use) finds a launcher that
  `compile_cache=` did not choose.

Both directories are made beside their final place and renamed in (nothing half-made is
seen); a made one is reused (one build tree has one toolchain: build_dir_key).
"""
from __future__ import annotations

import os
import shlex
from pathlib import Path

from orchestrator.builders.compile_cache.kind import CompileCache
from orchestrator.fs import remove_tree, temp_sibling

WRAPPERS_DIR = ".orch-cc"
PATH_DIR = ".orch-bin"
HIDDEN_UNLESS_CHOSEN = {"sccache": ("sccache",), "ccache": ("ccache",)}


def _script(command: list[str]) -> str:
    return "#!/bin/sh\nexec " + " ".join(shlex.quote(c) for c in command) + ' "$@"\n'


def _made(final: Path, scripts: dict[str, str]) -> Path:
    """`final`/<name> = script, each executable; made once, all at once."""
    if final.is_dir():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(final)
    tmp.mkdir()
    try:
        for name, text in scripts.items():
            (tmp / name).write_text(text)
            (tmp / name).chmod(0o755)
        os.rename(tmp, final)
    except OSError:
        if not final.is_dir():  # a concurrent build of this tree made it first: fine
            raise
    finally:
        remove_tree(tmp)
    return final


def compiler_wrappers(cc: CompileCache, compilers: dict[str, Path],
                      build_dir: Path) -> dict[str, str]:
    """{"CC": ..., "CXX": ...}: each of `compilers` (variable -> compiler) through the
    launcher, or the compiler itself when the compile cache is off."""
    if not cc.enabled or cc.launcher is None:
        return {var: str(path) for var, path in compilers.items()}
    where = _made(build_dir / WRAPPERS_DIR / cc.kind,
                  {path.name: _script([str(cc.launcher), str(path)]) for path in compilers.values()})
    return {var: str(where / path.name) for var, path in compilers.items()}


def build_path(path: str, venv_bin: Path, cc: CompileCache, build_dir: Path) -> str:
    """`path` with `venv_bin` replaced by a copy of it without the launchers the build does
    not use; `path` itself when it hides nothing."""
    chosen = cc.kind if cc.enabled else "off"
    hidden = tuple(p for kind, prefixes in HIDDEN_UNLESS_CHOSEN.items() if kind != chosen
                   for p in prefixes)
    try:
        names = sorted(p.name for p in venv_bin.iterdir()
                       if os.access(p, os.X_OK) and not p.is_dir())
    except OSError:
        return path
    if not any(n.startswith(hidden) for n in names):
        return path
    kept = {n: _script([str(venv_bin / n)]) for n in names if not n.startswith(hidden)}
    where = _made(build_dir / PATH_DIR / chosen, kept)
    return os.pathsep.join(str(where) if d == str(venv_bin) else d for d in path.split(os.pathsep))
