"""Compiled bytecode in an artifact's Python packages.

A store entry is read-only and workspaces set PYTHONDONTWRITEBYTECODE, so a package without
`__pycache__` is compiled from source by every process that imports it: `import torch` from
the 2.6 tree compiled 2,060 modules each time (2.2-2.6 s, 1.5 s of it compiling), in every
test, benchmark and debugger start. So each `.py` under the recipe's `outputs.python`
directories gets `__pycache__/<name>.<cache tag>.pyc`, compiled by the toolchain's own
interpreter, as pip does at install time, but hash-checked (PEP 552: the .pyc holds the
source's hash, not its mtime), so the bytes depend on the source alone, and the interpreter
checks the hash at each import instead of trusting an mtime. A .pyc already there (a pinned
wheel's, installed by pip) is kept.

Compiled files are kept in the build tree (CACHE, keyed by the interpreter, the file's place
and its source), so an incremental build compiles only the modules that changed. A module
that does not compile (a template, Python 2 code) gets no .pyc; its source still imports as
before, or fails as it did.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from orchestrator.builders.process import BuildFailed
from orchestrator.errors import UserError
from orchestrator.fs import write_atomic

# In the build tree: <2 hex>/<key>.pyc, or <key>.fail for a module that does not compile.
CACHE = ".orch-pyc"
_FACTS = "import importlib.util, sys; print(sys.implementation.cache_tag, importlib.util.MAGIC_NUMBER.hex())"
# Reads [[source, pyc, dfile], ...] from stdin; compiles each, hash-checked; prints the ones that failed.
_COMPILE = """import json, py_compile, sys
for src, pyc, dfile in json.load(sys.stdin):
    try:
        py_compile.compile(src, cfile=pyc, dfile=dfile, doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    except (py_compile.PyCompileError, SyntaxError, ValueError, UnicodeDecodeError):
        print(src)
"""


def interpreter_facts(python: Path) -> tuple[str, str]:
    """(sys.implementation.cache_tag, importlib.util.MAGIC_NUMBER as hex) of `python`."""
    res = subprocess.run([str(python), "-I", "-c", _FACTS], capture_output=True, text=True)
    if res.returncode != 0 or len(res.stdout.split()) != 2:
        raise UserError(f"{python}: cannot ask the toolchain's interpreter for its bytecode tag "
                        f"({(res.stderr.strip().splitlines() or ['no output'])[-1]}); "
                        "run `doit toolchain` again")
    tag, magic = res.stdout.split()
    return tag, magic


def sources(prefix: Path, python_dirs: list[str]) -> list[Path]:
    """The regular .py files under the prefix's Python directories (no symlinked trees)."""
    found: list[Path] = []
    for d in python_dirs:
        top = prefix / d
        if not top.is_dir() or top.is_symlink():
            continue
        for root, dirs, files in os.walk(top):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            found += [Path(root) / f for f in sorted(files)
                      if f.endswith(".py") and not os.path.islink(os.path.join(root, f))]
    return found


def compile_packages(prefix: Path, python_dirs: list[str], python: Path, cache: Path,
                     jobs: int) -> dict[str, int]:
    """Give every .py under prefix/<python_dirs> its hash-checked .pyc (see the module
    docstring); returns counts: compiled now, taken from the cache, kept, not compilable."""
    files = sources(prefix, python_dirs)
    counts = {"compiled": 0, "cached": 0, "kept": 0, "failed": 0}
    if not files:
        return counts
    tag, magic = interpreter_facts(python)
    todo: list[tuple[Path, Path, Path]] = []  # (source, its .pyc in the prefix, cache entry)
    for src in files:
        pyc = src.parent / "__pycache__" / f"{src.stem}.{tag}.pyc"
        if pyc.exists():
            counts["kept"] += 1
            continue
        rel = src.relative_to(prefix).as_posix()
        key = hashlib.sha256(f"{tag}\0{magic}\0{rel}\0".encode() + src.read_bytes()).hexdigest()
        entry = cache / key[:2] / f"{key}.pyc"
        if entry.with_suffix(".fail").exists():
            counts["failed"] += 1
            continue
        todo.append((src, pyc, entry))
    missing = [t for t in todo if not t[2].is_file()]
    failed = _compile(missing, prefix, python, cache, jobs)
    counts["compiled"] = len(missing) - len(failed)
    counts["failed"] += len(failed)
    counts["cached"] = len(todo) - len(missing)
    for src, pyc, entry in todo:
        if src in failed:
            continue
        pyc.parent.mkdir(exist_ok=True)
        shutil.copyfile(entry, pyc)
    return counts


def _compile(missing: list[tuple[Path, Path, Path]], prefix: Path, python: Path, cache: Path,
             jobs: int) -> set[Path]:
    """Compile each source into a temporary file beside its cache entry, then rename it into
    place (a killed build leaves no half-written entry); the sources that did not compile."""
    if not missing:
        return set()
    work = [(str(src), str(entry.with_name(f"{entry.name}.tmp-{os.getpid()}")),
             src.relative_to(prefix).as_posix()) for src, _pyc, entry in missing]
    for _src, tmp, _rel in work:
        Path(tmp).parent.mkdir(parents=True, exist_ok=True)
    chunks = [work[i::max(1, jobs)] for i in range(max(1, jobs))]

    def run(chunk: list[tuple[str, str, str]]) -> list[str]:
        res = subprocess.run([str(python), "-I", "-c", _COMPILE], input=json.dumps(chunk),
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise BuildFailed(f"{python}: compiling the artifact's Python bytecode failed: "
                              f"{(res.stderr.strip().splitlines() or ['no output'])[-1]}")
        return res.stdout.splitlines()

    with ThreadPoolExecutor(len(chunks)) as pool:
        failed = {Path(s) for out in pool.map(run, [c for c in chunks if c]) for s in out}
    for (src, _pyc, entry), (_s, tmp, _rel) in zip(missing, work, strict=True):
        if src in failed:
            write_atomic(entry.with_suffix(".fail"), "", durable=False)
            Path(tmp).unlink(missing_ok=True)
        else:
            os.replace(tmp, entry)
    return failed
