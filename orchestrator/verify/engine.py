"""Run every check over the ELF files of a tree and assemble the report."""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from orchestrator.hashing import remembered_sha256
from orchestrator.verify.cache import RootKeys, VerdictCache
from orchestrator.verify.checks.cuda import check_cuda
from orchestrator.verify.checks.cxx_abi import check_cxx_abi
from orchestrator.verify.checks.debug_info import check_debug_info, probe_ahead_candidates
from orchestrator.verify.checks.linkage import check_required_symbols, check_resolution, check_symbols
from orchestrator.verify.checks.portability import check_portability, vkey
from orchestrator.verify.checks.python_ext import check_python, is_extension
from orchestrator.verify.checks.state import State
from orchestrator.verify.elf import ElfInfo, header_platform
from orchestrator.verify.inputs import VerifyConfig
from orchestrator.verify.lldb_reading import StartedProbe, start_probe
from orchestrator.verify.report import FileFacts, Finding, Verdict, VerifyReport
from orchestrator.verify.resolve import Resolver, realpath, within

# Every check, in the order they run (the report lists them in this order).
ALL_CHECKS: dict[str, Callable[[State], list[Finding]]] = {
    "resolution": check_resolution,
    "symbols": check_symbols,
    "cxx_abi": check_cxx_abi,  # after symbols: uses the unresolved symbols
    "python": check_python,
    "debug_info": check_debug_info,
    "portability": check_portability,
    "required_symbols": check_required_symbols,
    "cuda": check_cuda,
}


def elf_files(prefix: Path) -> list[Path]:
    """Regular (non-symlink) ELF shared objects and executables under prefix, sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(prefix):
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if p.is_symlink() or not p.is_file():
                continue
            if name.endswith((".o", ".a", ".debug")) or header_platform(p) is None:
                continue
            out.append(p)
    return out


def _python_hosted(obj: ElfInfo) -> bool:
    return any(u.name.startswith((b"Py", b"_Py")) for u in obj.undefined)


def verify_tree(cfg: VerifyConfig) -> VerifyReport:
    """Check every ELF file under cfg.prefix; never raises for a failed check. With
    cfg.cache_dir, a file whose verdict key (verify/cache.py) is recorded is not checked
    again: its facts come from the record and the report lists it in `reused`."""
    t0 = time.perf_counter()
    resolver = Resolver(cfg.search)
    cache = VerdictCache.open(cfg.cache_dir) if cfg.cache_dir is not None else None
    keys = RootKeys(cfg, resolver) if cache is not None else None
    paths = list(cfg.roots if cfg.roots is not None else elf_files(cfg.prefix))
    ahead = _probe_ahead(cfg, paths)
    try:
        return _verify(cfg, t0, resolver, cache, keys, paths, ahead)
    finally:
        if ahead is not None:
            ahead.close()


def _probe_ahead(cfg: VerifyConfig, paths: list[Path]) -> StartedProbe | None:
    """The lldb probe, started now on the files it will read whose content no run has
    hashed (an incremental build's changed libraries: the others are the pool's, whose
    verdicts are reused), so that lldb reads libtorch_cpu.so while this process hashes it."""
    if cfg.lldb_deb_root is None or cfg.interpreter is None:
        return None
    new = []
    for p in probe_ahead_candidates(cfg, [Path(realpath(str(p))) for p in paths]):
        try:
            rel = str(p.relative_to(cfg.root.resolve()))
            if cfg.hashes.get(rel) is None and remembered_sha256(os.stat(p)) is None:
                new.append(p)
        except (OSError, ValueError):
            continue
    return start_probe(cfg.lldb_deb_root, cfg.interpreter.path, new) if new else None


def _verify(cfg: VerifyConfig, t0: float, resolver: Resolver, cache: VerdictCache | None,
            keys: RootKeys | None, paths: list[Path], ahead: StartedProbe | None) -> VerifyReport:
    objects: dict[str, ElfInfo] = {}
    reused: dict[str, FileFacts] = {}
    order: list[str] = []
    key_of: dict[str, str] = {}
    findings: list[Finding] = []
    root = cfg.root.resolve()
    for path in paths:
        real = realpath(str(path))
        rel = real[len(str(root)) + 1:] if within(real, str(root)) else str(path)
        try:
            if resolver.head(path).etype not in ("ET_DYN", "ET_EXEC"):
                continue
            key = keys.key(path, rel) if keys is not None else None
            hit = cache.get(key) if cache is not None and key is not None else None
            info = resolver.elf(path) if hit is None else None
        except ValueError as e:
            findings.append(Finding(check="resolution", severity="fail", file=rel, cause=str(e)))
            continue
        order.append(rel)
        if hit is not None:
            reused[rel] = hit[0]
            findings += hit[1]  # its warnings, as the run that recorded it found them
            continue
        if key is not None:
            key_of[rel] = key
        objects[rel] = info  # type: ignore[assignment]
    extensions = {rel for rel, o in objects.items() if is_extension(rel, o, cfg)}
    closures = {}
    for rel, obj in objects.items():
        preload = list(cfg.preload)
        if cfg.interpreter and not preload and (rel in extensions or _python_hosted(obj)):
            preload = [cfg.interpreter.path]
        closures[rel] = resolver.closure(obj.path, preload)
    facts = {rel: FileFacts(needed=o.needed, runpath=o.runpath, rpath=o.rpath) for rel, o in objects.items()}
    state = State(cfg, resolver, objects, closures, extensions, facts, reused=reused,
                  probe_ahead=ahead)
    try:
        checks: dict[str, Verdict] = {}
        timings = {"read_and_resolve_s": round(time.perf_counter() - t0, 4)}
        for name, check in ALL_CHECKS.items():
            if name in cfg.rules.skip:
                checks[name] = "skipped"
                continue
            t1 = time.perf_counter()
            found = check(state)
            timings[f"{name}_s"] = round(time.perf_counter() - t1, 4)
            findings += found
            checks[name] = "fail" if any(f.severity == "fail" for f in found) else "pass"
    finally:
        resolver.close()
    # Only a run without failures records verdicts, and only when each warning names the
    # file it is about (then a file's verdict is its own facts and warnings).
    if cache is not None and all(f.severity != "fail" and f.file in order for f in findings):
        for rel, key in key_of.items():
            cache.put(key, facts[rel], [f for f in findings if f.file == rel])
    findings, ignored = set_aside(findings, cfg.rules.ignore, checks)
    facts = {rel: facts[rel] if rel in facts else reused[rel] for rel in order}
    overall: dict[str, str] = {}
    for f in facts.values():
        for fam, v in f.max_versions.items():
            if fam not in overall or vkey(v) > vkey(overall[fam]):
                overall[fam] = v
    return VerifyReport(
        artifact=cfg.artifact, root=str(cfg.root), ok=not any(f.severity == "fail" for f in findings),
        checks=checks, findings=findings, files=facts, max_versions=overall, timings=timings,
        ignored=ignored,
        elapsed_s=round(time.perf_counter() - t0, 3), reused=sorted(reused))


def set_aside(findings: list[Finding], rules: Sequence[Any],
              checks: dict[str, Verdict]) -> tuple[list[Finding], list[Finding]]:
    """(kept, ignored): the findings on files a `[verify] ignore` rule names are set aside
    (their detail says the rule's reason); a check failed only by those passes."""
    def reason(file: str) -> str | None:
        rel = file[len("prefix/"):] if file.startswith("prefix/") else file
        return next((r.reason for r in rules if fnmatch(rel, r.path)), None)

    kept, ignored = [], []
    for f in findings:
        why = reason(f.file) if rules else None
        if why is None:
            kept.append(f)
        else:
            ignored.append(Finding(f.check, f.severity, f.file, f.cause, {**f.detail, "ignored": why}))
    for name, verdict in checks.items():
        if verdict == "fail" and not any(f.check == name and f.severity == "fail" for f in kept):
            checks[name] = "pass"
    return kept, ignored
