"""Read the machine's impure inputs (interpreter, compilers, system packages) as lock entries.

Used both to write the lock and to check the machine against it, so the two can never
disagree about what is measured.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from pydantic import ValidationError

from orchestrator.errors import UserError
from orchestrator.hashing import sha256_file
from orchestrator.model.lock import CompilerEntry, ProgramPin, PythonEntry, SystemPackageEntry
from orchestrator.model.recipe import describe_validation_error

PY_PROBE = r"""
import json, platform, sysconfig
g = sysconfig.get_config_var
print(json.dumps({"version": platform.python_version(), "soabi": g("SOABI"),
  "ext_suffix": g("EXT_SUFFIX"),
  "libpython": g("INSTSONAME") if g("Py_ENABLE_SHARED") else None}))
"""


def probe_python(path: str) -> PythonEntry:
    exe = shutil.which(path) if not os.path.isabs(path) else path
    if not exe or not os.path.exists(exe):
        raise UserError(f"python interpreter {path!r} not found; install it or fix [python] in the lock spec")
    real = os.path.realpath(exe)
    if "conda" in real.split(os.sep) or Path(real).parent.joinpath("conda").exists():
        raise UserError(f"python interpreter {real} belongs to conda; its static libpython breaks "
                        "lldb: use the system python3 (/usr/bin/python3)")
    not_python = (f"python interpreter {path!r} is not a working Python (%s); point [python] "
                  "interpreter in the lock spec at one, e.g. /usr/bin/python3, and run `doit lock`")
    try:
        res = subprocess.run([exe, "-c", PY_PROBE], capture_output=True, text=True, timeout=60)
        facts = json.loads(res.stdout.strip().splitlines()[-1]) if res.returncode == 0 else None
        if not isinstance(facts, dict):
            raise ValueError(f"exit status {res.returncode}")
        return PythonEntry(name="python", path=exe, version=facts["version"], soabi=facts["soabi"],
                           ext_suffix=facts["ext_suffix"], sha256=sha256_file(real),
                           libpython_soname=facts["libpython"])
    except (OSError, subprocess.SubprocessError) as e:
        raise UserError(not_python % (getattr(e, "strerror", None) or type(e).__name__)) from None
    except ValidationError as e:
        raise UserError(not_python % f"its probe printed bad facts: {describe_validation_error(e)}") from None
    except (ValueError, IndexError, KeyError, TypeError) as e:
        raise UserError(not_python % f"its probe printed no facts: {str(e)[:80]}") from None


def compiler_version_line(exe: str) -> str:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60,
                             errors="replace").stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown (does not run)"
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    for ln in lines:  # nvcc puts the release on a later line
        if "release" in ln and "Cuda" in ln:
            return ln
    return lines[0] if lines else "unknown"


# What a GCC-style driver runs, by the lock's compiler name (nvcc: its driver only, for now).
DRIVER_PROGRAMS = {"cc": ("cc1", "as", "ld"), "cxx": ("cc1plus", "as", "ld")}


def is_script(path: str) -> bool:
    """A text file starting with '#!' (a wrapper, not a compiler binary)."""
    try:
        with open(os.path.realpath(path), "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def driver_programs(name: str, exe: str) -> dict[str, ProgramPin] | None:
    """The programs the driver says it runs (`-print-prog-name`), each with its sha256."""
    wanted = DRIVER_PROGRAMS.get(name)
    if wanted is None:
        return None
    out: dict[str, ProgramPin] = {}
    for prog in wanted:
        try:
            res = subprocess.run([exe, f"-print-prog-name={prog}"], capture_output=True,
                                 text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return None
        reported = res.stdout.strip()
        if res.returncode != 0 or not reported:
            return None  # not a GCC-style driver
        found = reported if os.path.isabs(reported) else shutil.which(reported)
        if not found or not os.path.isfile(found):
            continue  # e.g. gcc names cc1 for a driver without it; nothing to pin
        real = os.path.realpath(found)
        out[prog] = ProgramPin(path=real, sha256=sha256_file(real))
    return out


def probe_compiler(name: str, command: str, *, pin_programs: bool = False) -> CompilerEntry:
    exe = shutil.which(command)
    if not exe:
        raise UserError(f"compiler {name}={command!r} not found on PATH; install it or fix [compilers] in the lock spec")
    try:
        sha = sha256_file(os.path.realpath(exe))
    except OSError as e:
        raise UserError(f"compiler {name}={exe}: cannot read it ({e.strerror})") from None
    return CompilerEntry(name=name, path=exe, version=compiler_version_line(exe), sha256=sha,
                         programs=driver_programs(name, exe) if pin_programs else None)


def probe_syspkg(name: str) -> SystemPackageEntry | None:
    """The installed version of a Debian package, or None when it is not installed."""
    res = subprocess.run(["dpkg-query", "-W", "-f", "${Status}\t${Version}\t${Architecture}", name],
                         capture_output=True, text=True)
    if res.returncode != 0:
        return None
    status, version, arch = res.stdout.split("\t")
    if not status.endswith("installed") or status.startswith("deinstall"):
        return None
    return SystemPackageEntry(name=name, version=version, arch=arch)
