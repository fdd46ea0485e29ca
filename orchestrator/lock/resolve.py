"""`doit lock`: resolve locks/<name>.toml into locks/<name>.lock.json."""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
import urllib.parse
from pathlib import Path

from orchestrator.errors import UserError
from orchestrator.hashing import sha256_file
from orchestrator.lock.apt_suite import resolve_suite_debs
from orchestrator.lock.files import load_spec, lock_path
from orchestrator.lock.probe import is_script, probe_compiler, probe_python, probe_syspkg
from orchestrator.model.lock import CondaEntry, CudaSpec, CudaToolkitEntry, DebEntry, Lock, LockEntry, PypiEntry
from orchestrator.model.platform_facts import platform_facts


def resolve_pypi(interpreter: str, requirements: list[str],
                 preferred: dict[str, str] | None = None,
                 held: dict[str, str] | None = None) -> list[PypiEntry]:
    """Ask pip (of a throwaway venv of the locked interpreter) what it would install.
    preferred (name -> version, the lock's as it is): kept where the requirements still
    allow them (pip constraints), as `uv lock` keeps a lock's versions; an index that gained
    a release changes nothing until `doit lock upgrade=1`. Requirements that no longer allow
    them resolve afresh. held (name -> version): hard constraints, never dropped (a recipe's
    runtime requirements are held to its lock's pins)."""
    if not requirements:
        return []
    with tempfile.TemporaryDirectory(prefix="orch-lock-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([interpreter, "-m", "venv", str(venv)], check=True)
        report = Path(tmp) / "report.json"
        argv = [str(venv / "bin" / "python"), "-m", "pip", "install", "--dry-run",
                "--ignore-installed", "--quiet", "--only-binary=:all:", "--report", str(report)]
        if held:
            fixed = Path(tmp) / "held-versions.txt"
            fixed.write_text("".join(f"{n}=={v}\n" for n, v in sorted(held.items())))
            argv += ["-c", str(fixed)]
        res = None
        if preferred:
            pins = Path(tmp) / "locked-versions.txt"
            pins.write_text("".join(f"{n}=={v}\n" for n, v in sorted(preferred.items())))
            res = subprocess.run([*argv, "-c", str(pins), *requirements],
                                 capture_output=True, text=True)
        if res is None or res.returncode != 0:
            res = subprocess.run([*argv, *requirements], capture_output=True, text=True)
        if res.returncode != 0:
            last = (res.stderr.strip().splitlines() or ["pip failed"])[-1]
            what = "[pypi] requirements" if held is None else "requirements"
            raise UserError(f"pip could not resolve the {what}: {last}")
        data = json.loads(report.read_text())
    entries = []
    for item in data["install"]:
        info = item["download_info"]
        url = info["url"]
        filename = urllib.parse.unquote(url.rsplit("/", 1)[-1])
        hashes = info.get("archive_info", {}).get("hashes") or {}
        digest = hashes.get("sha256")
        if digest is None and url.startswith("file://"):
            digest = sha256_file(urllib.parse.unquote(url[len("file://"):]))
        if digest is None:
            raise UserError(f"pip reported no sha256 for {filename}; cannot lock it")
        meta = item["metadata"]
        entries.append(PypiEntry(name=meta["name"].lower().replace("_", "-"),
                                 version=meta["version"], filename=filename, sha256=digest))
    return entries


def _apt_cache_options(cache_dir: Path | None) -> list[str]:
    """Where apt-cache may keep its binary package cache between calls. Debian's container
    images set it to "" (no cache), and then every `apt-cache show` rebuilds it from the
    package lists: about 3 s a call here, against 0.5 s with a cache kept for one `doit lock`."""
    if cache_dir is None:
        return []
    return ["-o", f"Dir::Cache::pkgcache={cache_dir / 'pkgcache.bin'}",
            "-o", f"Dir::Cache::srcpkgcache={cache_dir / 'srcpkgcache.bin'}"]


def _apt_show(package: str, cache_dir: Path | None = None) -> dict[str, str]:
    res = subprocess.run(["apt-cache", *_apt_cache_options(cache_dir), "show",
                          "--no-all-versions", package], capture_output=True, text=True)
    if res.returncode != 0 or not res.stdout.strip():
        raise UserError(f"Debian package {package!r} is not known to apt; run `apt-get update` "
                        "or fix [deb] in the lock spec")
    fields: dict[str, str] = {}
    for line in res.stdout.split("\n\n")[0].splitlines():
        if line[:1].isspace() or ":" not in line:
            continue
        k, v = line.split(":", 1)
        fields[k] = v.strip()
    return fields


def _dependency_names(depends: str) -> list[list[str]]:
    groups = []
    for part in depends.split(","):
        alts = [a.strip().split(" ")[0].split(":")[0] for a in part.split("|") if a.strip()]
        if alts:
            groups.append(alts)
    return groups


def resolve_debs(packages: list[str], exclude: list[str],
                 apt_cache: Path | None = None) -> list[DebEntry]:
    """The named packages plus, recursively, dependencies the system does not have.
    apt_cache: a private directory for apt-cache's binary cache (see _apt_cache_options)."""
    seen: dict[str, DebEntry] = {}
    todo = list(packages)
    while todo:
        name = todo.pop(0)
        if name in seen or name in exclude:
            continue
        f = _apt_show(name, apt_cache)
        seen[name] = DebEntry(name=name, version=f["Version"], arch=f["Architecture"],
                              sha256=f["SHA256"], filename=f["Filename"].rsplit("/", 1)[-1])
        for alts in _dependency_names(f.get("Depends", "") + ("," + f["Pre-Depends"] if "Pre-Depends" in f else "")):
            if any(probe_syspkg(a) is not None for a in alts) or any(a in seen for a in alts):
                continue
            todo.append(alts[0])
    return list(seen.values())


def resolve_conda(lockfile: Path, platform: str) -> list[CondaEntry]:
    """Entries for one platform of a conda-lock file, read with conda-lock's own models."""
    from conda_lock.lockfile import parse_conda_lock_file

    if not lockfile.is_file():
        raise UserError(f"conda-lock file {lockfile} not found; fix [conda] lockfile in the lock spec")
    parsed = parse_conda_lock_file(lockfile)
    out = []
    for pkg in parsed.package:
        if pkg.platform != platform or pkg.manager != "conda":
            continue
        out.append(CondaEntry(name=pkg.name, version=pkg.version, platform=pkg.platform,
                              url_filename=pkg.url.rsplit("/", 1)[-1],
                              sha256=pkg.hash.sha256, md5=pkg.hash.md5))
    return out


def _requirement_name(req: str) -> str:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(req).name.lower().replace("_", "-")
    except InvalidRequirement:
        raise UserError(f"[cuda] requirement {req[:80]!r} is not a requirement; write e.g. "
                        "\"nvidia-cuda-nvcc==13.0.88\"") from None


# The deb toolkit's compiler package and where its tools are in it (Debian's layout).
DEB_NVCC_PACKAGE = "nvidia-cuda-toolkit"
DEB_TOOLKIT_ROOT = "usr/lib/nvidia-cuda-toolkit"
# Where [cuda.gdb]'s packages are unpacked: <toolchain>/debs/<GDB_TREE>.
GDB_TREE = "cuda-gdb"


def cuda_deb_toolkit_entry(debs: list[DebEntry], where: Path) -> CudaToolkitEntry:
    """The `cuda:toolkit` entry of a [cuda.debs] toolkit: its version is the compiler's
    upstream release (nvidia-cuda-toolkit 12.4.131~12.4.1-2 -> 12.4.131)."""
    by_name = {d.name: d for d in debs}
    if DEB_NVCC_PACKAGE not in by_name:
        raise UserError(f"{where}: [cuda.debs] packages lack {DEB_NVCC_PACKAGE} (nvcc); add it")
    upstream = by_name[DEB_NVCC_PACKAGE].version.split(":")[-1].split("~")[0].split("-")[0]
    return CudaToolkitEntry(version=upstream, root=DEB_TOOLKIT_ROOT, origin="deb",
                            packages={d.name: d.sha256 for d in sorted(debs, key=lambda d: d.name)})


def cuda_toolkit_entry(spec: CudaSpec, resolved: list[PypiEntry], where: Path) -> CudaToolkitEntry:
    """The `cuda:toolkit` entry: the [cuda] wheels as pip resolved them, by sha256; its
    version is nvidia-cuda-nvcc's (the compiler's release)."""
    names = {_requirement_name(r) for r in spec.requirements}
    by_name = {e.name: e for e in resolved}
    if "nvidia-cuda-nvcc" not in names:
        raise UserError(f"{where}: [cuda] requirements lack nvidia-cuda-nvcc (the compiler); "
                        "add e.g. \"nvidia-cuda-nvcc==13.0.88\"")
    return CudaToolkitEntry(version=by_name["nvidia-cuda-nvcc"].version, root=spec.root,
                            packages={n: by_name[n].sha256 for n in sorted(names)})


def locked_versions(locks_dir: Path, name: str) -> dict[str, str]:
    """The pypi versions locks/<name>.lock.json pins now, whether or not its spec changed
    since ({} when there is none or it does not parse: resolved afresh)."""
    try:
        entries = json.loads(lock_path(locks_dir, name).read_text())["entries"]
        pins = [PypiEntry.model_validate(e) for e in entries.values() if e.get("kind") == "pypi"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}
    return {e.name: e.version for e in pins}


def resolve_lock(locks_dir: Path, name: str, upgrade: bool = False,
                 apt_cache: Path | None = None) -> Lock:
    spec, spec_sha = load_spec(locks_dir, name)
    entries: list[LockEntry] = []
    py = probe_python(spec.python.interpreter)
    entries.append(py)
    preferred = {} if upgrade else locked_versions(locks_dir, name)
    cuda_reqs = spec.cuda.requirements if spec.cuda is not None else []
    pypi = resolve_pypi(py.path, [*spec.pypi.requirements, *cuda_reqs], preferred)
    entries += pypi
    where = locks_dir / f"{name}.toml"
    with tempfile.TemporaryDirectory(prefix="orch-apt-suite-") as home:  # one index per suite
        if spec.cuda is not None and spec.cuda.debs is not None:  # (not with requirements: CudaSpec)
            suite_debs = resolve_suite_debs(spec.cuda.debs, Path(home))
            entries += suite_debs
            entries.append(cuda_deb_toolkit_entry(suite_debs, where))
        if spec.cuda is not None and spec.cuda.gdb is not None:
            entries += resolve_suite_debs(spec.cuda.gdb, Path(home), tree=GDB_TREE)
    if spec.cuda is not None and spec.cuda.debs is None:
        entries.append(cuda_toolkit_entry(spec.cuda, pypi, where))
    entries += resolve_debs(spec.deb.packages, spec.deb.exclude, apt_cache)
    for cname, command in sorted(spec.compilers.items()):
        entry = probe_compiler(cname, command, pin_programs=True)
        if not os.path.isabs(command) and is_script(entry.path):
            raise UserError(f"compiler {cname}={command!r} resolves on PATH to {entry.path}, a "
                            "script (a wrapper?), not a compiler; fix PATH, or name it by its "
                            f"absolute path in [compilers] of {locks_dir / (name + '.toml')} "
                            "to pin the wrapper on purpose")
        entries.append(entry)
    for pkg in spec.system.packages:
        found = probe_syspkg(pkg)
        if found is None:
            raise UserError(f"system package {pkg!r} ([system] in {locks_dir / (name + '.toml')}) "
                            f"is not installed; apt-get install {pkg}")
        entries.append(found)
    if spec.conda is not None:
        entries += resolve_conda((locks_dir / spec.conda.lockfile), spec.conda.platform)
    keyed = {e.key: e for e in entries}
    if len(keyed) != len(entries):
        dup = sorted(k for k in keyed if sum(e.key == k for e in entries) > 1)[0]
        raise UserError(f"{where}: {dup} is pinned twice (two sections name the package); "
                        "name it in one of them")
    return Lock(name=name, spec_sha256=spec_sha, platform=platform_facts(), entries=keyed)


def lock_all(locks_dir: Path, only: str | None = None, upgrade: bool = False) -> list[Lock]:
    names = [only] if only else sorted(p.name[:-len(".toml")] for p in locks_dir.glob("*.toml"))
    with tempfile.TemporaryDirectory(prefix="orch-apt-cache-") as apt_cache:
        return [resolve_lock(locks_dir, n, upgrade, Path(apt_cache)) for n in names]



