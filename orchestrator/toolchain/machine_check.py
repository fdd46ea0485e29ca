"""The machine against the lock: the impure inputs (interpreter, compilers, system packages)
must be exactly the locked ones; drift is a UserError naming the input (exit 2).

The interpreter's probe (a subprocess and a hash of the binary) runs once per process and
interpreter file: `make_plan` and `ensure_toolchain` both check it, and a binary replaced in
between (other size, mtime, inode or ctime) is probed again. Across processes, a plan's
check remembers probe answers in the store (`probe_cache`, lock/probe_cache.py): an
unchanged interpreter or compiler driver is not run again; the full check always runs them.
"""
from __future__ import annotations

import os
import shutil

from orchestrator.errors import UserError
from orchestrator.fs import FileSig
from orchestrator.hashing import StatCache
from orchestrator.lock.probe import probe_compiler, probe_python, probe_syspkg
from orchestrator.lock.probe_cache import ProbeCache
from orchestrator.memo.file_reads import note_stat
from orchestrator.model.lock import CompilerEntry, Lock, PythonEntry, SystemPackageEntry
from orchestrator.store.artifacts import Store

# (path as locked, what it resolves to, stat of the real file) -> the probe's facts.
_PYTHON_PROBES: dict[tuple[object, ...], PythonEntry] = {}


def probe_python_once(path: str, fresh: bool = False,
                      probes: ProbeCache | None = None) -> PythonEntry:
    """`probe_python(path)`, remembered for this process while the binary's stat is the same,
    and across processes in `probes` (fresh=True probes again, as the full check does).
    Failures are never remembered."""
    exe = shutil.which(path) if not os.path.isabs(path) else path
    try:
        real = os.path.realpath(exe) if exe else None
        st = os.stat(real) if real else None
    except OSError:
        st = None
    if st is None:
        return probe_python(path)  # not found / unreadable: its own message
    note_stat(real, st)
    key = (path, exe, real, *FileSig.of(st))
    if fresh or key not in _PYTHON_PROBES:
        if fresh or probes is None:
            _PYTHON_PROBES[key] = probe_python(path)
        else:
            facts = probes.answer(path, "python-facts",
                                  lambda: probe_python(path).model_dump(mode="json"))
            _PYTHON_PROBES[key] = PythonEntry.model_validate(facts)
    return _PYTHON_PROBES[key]


def machine_cache(store: Store) -> StatCache:
    """Stat cache (size, mtime_ns, inode, ctime_ns -> sha256) for check_machine's files (the
    compilers, what they run, the CUDA toolkit): an unchanged file is not read again."""
    return StatCache(store.paths.machine_stat_cache)


def probe_cache(store: Store) -> ProbeCache:
    """What the interpreter and the compiler drivers answered (`--version`,
    `-print-prog-name`, the interpreter's facts) per binary, and dpkg per package, while
    dpkg's database is unchanged (see lock/probe_cache.py)."""
    return ProbeCache(store.paths.probe_cache)


def check_machine(lock: Lock, keys: list[str] | None = None,
                  cache: StatCache | None = None, save: bool = True,
                  probes: ProbeCache | None = None) -> None:
    """Impure inputs (interpreter, compilers, system packages) must be exactly the locked ones.

    Without `cache` every pinned file is read and hashed and every probe runs (the full
    check: `doit lock`, `doit verify toolchain=1`, check=1); with one, files whose stat is
    unchanged are not read, and the interpreter probe of this process is reused; `probes`
    (only with `cache`) also reuses what an unchanged binary answered before. The caches
    are saved when the check passed (save=False: the caller saves them with
    `save_machine_cache` once its command got past bad input, so a refused command leaves
    the store as it was)."""
    _check_machine(lock, keys, cache, probes if cache is not None else None)
    if cache is not None and save:
        save_machine_cache(cache, probes)


def check_interpreter(lock: Lock) -> None:
    """The locked interpreter is the machine's (the probe of this process is reused)."""
    entry = lock.entries["python"]
    assert isinstance(entry, PythonEntry)
    _check_python("python", entry, fresh=False)


def save_machine_cache(cache: StatCache, probes: ProbeCache | None = None) -> None:
    try:
        cache.save()
        if probes is not None:
            probes.save()
    except OSError:
        pass  # a cache only: an unwritable store costs the next check a re-read


def _check_python(key: str, entry: PythonEntry, fresh: bool,
                  probes: ProbeCache | None = None) -> None:
    found = probe_python_once(entry.path, fresh=fresh, probes=probes)
    _compare(key, "sha256", entry.sha256, found.sha256, entry.path)
    _compare(key, "version", entry.version, found.version, entry.path)


def _check_machine(lock: Lock, keys: list[str] | None, cache: StatCache | None,
                   probes: ProbeCache | None) -> None:
    for key, entry in sorted(lock.entries.items()):
        if keys is not None and key not in keys:
            continue
        if isinstance(entry, PythonEntry):
            _check_python(key, entry, fresh=cache is None, probes=probes)
        elif isinstance(entry, CompilerEntry):
            found_c = probe_compiler(entry.name, entry.path,
                                     pin_programs=entry.programs is not None, cache=cache,
                                     probes=probes)
            _compare(key, "sha256", entry.sha256, found_c.sha256, entry.path)
            for prog, pin in sorted((entry.programs or {}).items()):
                got = (found_c.programs or {}).get(prog)
                if got is None or got.sha256 != pin.sha256:
                    what = "is missing" if got is None else "changed"
                    if got is not None and got.path != pin.path:
                        what = f"is now {got.path}"
                    raise UserError(
                        f"lock drift: {key} ({entry.path}) program {prog} sha256: {pin.path} "
                        f"{what} (sha256 {got.sha256 if got else 'none'}, the lock says "
                        f"{pin.sha256}); restore the locked input or run `doit lock` to "
                        "accept the new one")
        elif isinstance(entry, SystemPackageEntry):
            found_s = probe_syspkg(entry.name, probes)
            _compare(key, "version", entry.version, found_s.version if found_s else "not installed",
                     f"Debian package {entry.name}")


def _compare(key: str, field: str, expected: str, found: str, where: str) -> None:
    if expected != found:
        raise UserError(f"lock drift: {key} ({where}) {field} is {found}, the lock says {expected}; "
                        "restore the locked input or run `doit lock` to accept the new one")
