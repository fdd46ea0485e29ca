"""The C++ standard a tree's top-level CMakeLists.txt asks for (PyTorch: C++17 up to 2.12,
C++20 from 2.13), checked against the locked compiler before anything is configured or
compiled: the compiler, run with -std=c++N, must report a __cplusplus of at least that
standard's value (GCC 10 accepts -std=c++20 but reports 201709L: too old, as PyTorch's
own check says; GCC 11+ and clang 10+ report 202002L)."""
from __future__ import annotations

import contextlib
import json
import re
import subprocess
from pathlib import Path

from orchestrator.errors import UserError
from orchestrator.fs import write_atomic
from orchestrator.memo.file_reads import stat_sig

# set(CMAKE_CXX_STANDARD 20 ...) or set(CMAKE_CXX_STANDARD\n    20\n    CACHE STRING ...), the
# first one outside a comment; a tree that sets none is not checked.
STANDARD_RE = re.compile(r"^[ \t]*set\s*\(\s*CMAKE_CXX_STANDARD\s+\"?(\d+)\"?", re.I | re.M)
COMMENT_RE = re.compile(r"#.*$", re.M)
# A passing probe, kept in an existing build tree under the compiler's stat (a probe costs
# 0.05-0.1 s, on every incremental build otherwise); a refusal writes nothing.
PROBE_KEPT = ".orch-cxx-standard.json"
# __cplusplus per standard (ISO's values; C++26's is the one GCC and clang use today).
CPLUSPLUS = {11: 201103, 14: 201402, 17: 201703, 20: 202002, 23: 202302, 26: 202400}


def required_standard(cmakelists: Path) -> int | None:
    """The C++ standard a CMakeLists.txt sets with set(CMAKE_CXX_STANDARD N ...), or None."""
    if not cmakelists.is_file():
        return None
    m = STANDARD_RE.search(COMMENT_RE.sub("", cmakelists.read_text(errors="replace")))
    return int(m[1]) if m else None


def reported_cplusplus(cxx: Path, standard: int) -> int | None:
    """__cplusplus as `cxx -std=c++N` defines it; None when it refuses the flag."""
    res = subprocess.run([str(cxx), f"-std=c++{standard}", "-x", "c++", "-E", "-P", "-"],
                         input="__cplusplus\n", capture_output=True, text=True)
    m = re.search(r"(\d+)L", res.stdout) if res.returncode == 0 else None
    return int(m[1]) if m else None


def check_standard(cxx: Path, cmakelists: Path, where: str,
                   build_dir: Path | None = None) -> int | None:
    """One line, exit 2, when the compiler cannot do the standard the tree asks for."""
    standard = required_standard(cmakelists)
    if standard is None or standard not in CPLUSPLUS:
        return standard
    key = [str(cxx), stat_sig(str(cxx)), standard]
    kept = build_dir / PROBE_KEPT if build_dir is not None else None
    with contextlib.suppress(OSError, ValueError, TypeError):
        if kept is not None and json.loads(kept.read_bytes()) == key:
            return standard
    got = reported_cplusplus(cxx, standard)
    if got is None or got < CPLUSPLUS[standard]:
        found = (f"refuses -std=c++{standard}" if got is None
                 else f"reports __cplusplus {got}L for -std=c++{standard}")
        hint = " (GCC 11+ or clang 10+)" if standard == 20 else ""
        raise UserError(f"{where}: {cmakelists} sets CMAKE_CXX_STANDARD {standard}, but the locked "
                        f"compiler {cxx} {found} (C++{standard} needs {CPLUSPLUS[standard]}L); pin a "
                        f"newer C++ compiler{hint} in the recipe's lock [compilers]")
    if kept is not None and kept.parent.is_dir():
        with contextlib.suppress(OSError):
            write_atomic(kept, json.dumps(key), durable=False)
    return standard
