"""Read the machine's impure inputs (interpreter, compilers, system packages) as lock entries.

Used both to write the lock and to check the machine against it, so the two can never
disagree about what is measured.
"""
from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from pydantic import ValidationError

from orchestrator.errors import UserError
from orchestrator.hashing import StatCache, sha256_file, tree_digest
from orchestrator.lock.probe_cache import ProbeCache
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


def _version_output(exe: str) -> str | None:
    try:
        return subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60,
                              errors="replace").stdout
    except (OSError, subprocess.SubprocessError):
        return None


def compiler_version_line(exe: str, probes: ProbeCache | None = None) -> str:
    """The line of `exe --version` naming the release (`probes`: remembered per binary)."""
    out = probes.answer(exe, "--version", lambda: _version_output(exe)) if probes is not None \
        else _version_output(exe)
    if out is None:
        return "unknown (does not run)"
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    for ln in lines:  # nvcc puts the release on a later line
        if "release" in ln and "Cuda" in ln:
            return ln
    return lines[0] if lines else "unknown"


# What a GCC-style driver runs, by the lock's compiler name.
DRIVER_PROGRAMS = {"cc": ("cc1", "as", "ld"), "cxx": ("cc1plus", "as", "ld")}
# What nvcc runs, found on the PATH its `--dryrun` prints (nvcc.profile: nvvm/bin, bin).
NVCC_TOOLS = ("cicc", "ptxas", "fatbinary", "nvlink", "cudafe++")


def hash_file(path: str, cache: StatCache | None = None) -> str:
    """sha256 of a file; with a StatCache an unchanged file (size, mtime, inode, ctime) is
    not read again. No cache: always read (what `doit lock`, verify and check=1 do)."""
    return cache.sha256(Path(path)) if cache is not None else sha256_file(path)


def is_script(path: str) -> bool:
    """A text file starting with '#!' (a wrapper, not a compiler binary)."""
    try:
        with open(os.path.realpath(path), "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def _prog_name(exe: str, prog: str) -> str | None:
    """What `exe -print-prog-name=prog` prints; None when it does not run or prints nothing
    (not a GCC-style driver)."""
    try:
        res = subprocess.run([exe, f"-print-prog-name={prog}"], capture_output=True,
                             text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    reported = res.stdout.strip()
    return reported if res.returncode == 0 and reported else None


def driver_programs(name: str, exe: str, cache: StatCache | None = None,
                    probes: ProbeCache | None = None) -> dict[str, ProgramPin] | None:
    """The programs the driver says it runs (`-print-prog-name`), each with its sha256.
    `probes` remembers the driver's answers per binary; where an answer leads (PATH, the
    file's content) is looked at every time."""
    wanted = DRIVER_PROGRAMS.get(name)
    if wanted is None:
        return None
    out: dict[str, ProgramPin] = {}
    for prog in wanted:
        question = f"-print-prog-name={prog}"
        reported = probes.answer(exe, question, lambda prog=prog: _prog_name(exe, prog)) \
            if probes is not None else _prog_name(exe, prog)
        if reported is None:
            return None  # not a GCC-style driver
        found = reported if os.path.isabs(reported) else shutil.which(reported)
        if not found or not os.path.isfile(found):
            continue  # e.g. gcc names cc1 for a driver without it; nothing to pin
        real = os.path.realpath(found)
        out[prog] = ProgramPin(path=real, sha256=hash_file(real, cache))
    return out


def nvcc_dryrun_facts(exe: str) -> dict[str, str]:
    """The variables `nvcc --dryrun` prints (`#$ NAME=value`) for a tiny .cu: TOP, PATH,
    CICC_PATH, INCLUDES, LIBRARIES, NVVMIR_LIBRARY_DIR, ... as nvcc.profile sets them."""
    with tempfile.TemporaryDirectory(prefix="orch-nvcc-") as tmp:
        src = Path(tmp) / "probe.cu"
        src.write_text("__global__ void k() {}\n")
        try:
            res = subprocess.run([exe, "--dryrun", "-c", str(src), "-o", str(Path(tmp) / "probe.o")],
                                 capture_output=True, text=True, timeout=60, cwd=tmp,
                                 errors="replace")
        except (OSError, subprocess.SubprocessError) as e:
            raise UserError(f"compiler nvcc={exe}: `nvcc --dryrun` does not run "
                            f"({getattr(e, 'strerror', None) or type(e).__name__})") from None
    facts: dict[str, str] = {}
    for line in (res.stderr + "\n" + res.stdout).splitlines():
        m = re.match(r"#\$ (\w+)=(.*)$", line)
        if m:
            facts[m[1]] = m[2].strip()
    if res.returncode != 0 or "PATH" not in facts:
        raise UserError(f"compiler nvcc={exe}: `nvcc --dryrun` printed no tool paths (exit "
                        f"{res.returncode}); is it a CUDA nvcc? fix [compilers] in the lock spec")
    return facts


def _flag_dirs(value: str, flag: str) -> list[str]:
    try:
        words = shlex.split(value)
    except ValueError:
        return []
    return [w[len(flag):] for w in words if w.startswith(flag) and len(w) > len(flag)]


def nvcc_toolkit(exe: str, cache: StatCache | None = None) -> dict[str, ProgramPin]:
    """The CUDA toolkit behind an nvcc driver, found as nvcc finds it (`--dryrun`): the tools
    it runs (cicc, ptxas, fatbinary, nvlink, cudafe++), nvcc.profile, libdevice, cudart
    (shared and static) and a digest of the include directory (paths, exec bits, symlink
    targets, sha256 of every file), each {path (real), sha256}."""
    facts = nvcc_dryrun_facts(exe)
    out: dict[str, ProgramPin] = {}

    def pin(name: str, path: str) -> None:
        real = os.path.realpath(path)
        out[name] = ProgramPin(path=real, sha256=hash_file(real, cache))

    for tool in NVCC_TOOLS:
        found = shutil.which(tool, path=facts["PATH"])
        if found is None:
            raise UserError(f"compiler nvcc={exe}: no {tool} on the PATH `nvcc --dryrun` "
                            "prints; the CUDA toolkit is incomplete")
        pin(tool, found)
    profile = os.path.join(os.path.dirname(os.path.realpath(exe)), "nvcc.profile")
    if os.path.isfile(profile):
        pin("nvcc.profile", profile)
    libdevice = sorted(glob.glob(os.path.join(facts.get("NVVMIR_LIBRARY_DIR", ""), "libdevice*.bc")))
    if libdevice:
        pin("libdevice", libdevice[0])
    libdirs = [d for d in _flag_dirs(facts.get("LIBRARIES", ""), "-L")
               if os.path.basename(os.path.normpath(d)) != "stubs"]
    for name, pattern in (("cudart", "libcudart.so.*"), ("cudart_static", "libcudart_static.a")):
        hits = [h for d in libdirs for h in sorted(glob.glob(os.path.join(d, pattern)))]
        if not hits:
            raise UserError(f"compiler nvcc={exe}: no {pattern} in the library directories "
                            f"`nvcc --dryrun` names ({', '.join(libdirs) or 'none'})")
        pin(name, hits[0])
    includes = [d for d in _flag_dirs(facts.get("INCLUDES", ""), "-I") if os.path.isdir(d)]
    if not includes:
        raise UserError(f"compiler nvcc={exe}: `nvcc --dryrun` names no include directory")
    inc = os.path.realpath(includes[0])
    out["include"] = ProgramPin(path=inc, sha256=tree_digest(Path(inc), cache, exclude_dirs=()))
    return out


def probe_compiler(name: str, command: str, *, pin_programs: bool = False,
                   cache: StatCache | None = None,
                   probes: ProbeCache | None = None) -> CompilerEntry:
    """The driver (and with pin_programs what it runs: DRIVER_PROGRAMS, or for nvcc its
    CUDA toolkit), hashed; `cache` spares re-reading unchanged files and `probes` re-asking
    an unchanged driver (check_machine). nvcc's `--dryrun` is always asked: its answer
    follows nvcc.profile, not only the binary."""
    exe = shutil.which(command)
    if not exe:
        raise UserError(f"compiler {name}={command!r} not found on PATH; install it or fix [compilers] in "
                        "the lock spec")
    try:
        sha = hash_file(os.path.realpath(exe), cache)
    except OSError as e:
        raise UserError(f"compiler {name}={exe}: cannot read it ({e.strerror})") from None
    programs = None
    if pin_programs:
        programs = (nvcc_toolkit(exe, cache) if name == "nvcc"
                    else driver_programs(name, exe, cache, probes))
    return CompilerEntry(name=name, path=exe, version=compiler_version_line(exe, probes), sha256=sha,
                         programs=programs)


# dpkg's database: rewritten (a new file) by every install, removal or upgrade.
DPKG_STATUS = "/var/lib/dpkg/status"


def _dpkg_query(name: str) -> dict[str, str] | None:
    res = subprocess.run(["dpkg-query", "-W", "-f", "${Status}\t${Version}\t${Architecture}", name],
                         capture_output=True, text=True)
    if res.returncode != 0:
        return None
    status, version, arch = res.stdout.split("\t")
    if not status.endswith("installed") or status.startswith("deinstall"):
        return None
    return {"name": name, "version": version, "arch": arch}


def probe_syspkg(name: str, probes: ProbeCache | None = None) -> SystemPackageEntry | None:
    """The installed version of a Debian package, or None when it is not installed
    (`probes`: remembered while dpkg's status database is unchanged)."""
    found = probes.answer(DPKG_STATUS, f"dpkg-query {name}", lambda: _dpkg_query(name)) \
        if probes is not None else _dpkg_query(name)
    return SystemPackageEntry(**found) if found is not None else None
