"""The debug-info check: DWARF, -g and -O as the variant's build type expects, the pinned
lldb-14 reading parameters of sampled functions (verify/lldb_reading.py), and
meta/CMakeCache.txt recording that build type."""
from __future__ import annotations

import fnmatch
import json
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orchestrator.verify.checks.state import State
from orchestrator.verify.dwarf import debug_facts
from orchestrator.verify.elf import ElfInfo
from orchestrator.verify.inputs import VerifyConfig
from orchestrator.verify.lldb_reading import (
    LLDB14_FLAGS,
    PROBE_TIMEOUT_S,
    StartedProbe,
    flags_to_add,
    optimized_out,
    probe,
    unreadable,
)
from orchestrator.verify.report import Finding

DEFAULT_OPT = {"RelWithDebInfo": "2", "Debug": "0"}
DEBUG_TYPES = ("RelWithDebInfo", "Debug")
_COMPILER_PRODUCER = re.compile(r"^(GNU C|GNU Fortran|clang|Clang|Ubuntu clang|Debian clang)")


def producer_flags(producer: str) -> tuple[bool, str]:
    """(-g given, the effective -O level) from a DW_AT_producer string."""
    toks = producer.split()
    has_g = any(t.startswith("-g") and t != "-g0" for t in toks)
    level = "0"
    for t in toks:
        m = re.fullmatch(r"-O(\d|s|g|fast|z)?", t)
        if m:
            level = m.group(1) or "1"
    return has_g, level


def _own(rel_prefix: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatch(rel_prefix, p) or fnmatch.fnmatch("x/" + rel_prefix, p)
               for p in patterns)


def code_free_library(obj: ElfInfo) -> bool:
    """A shared library (not a PIE executable: no interpreter) exporting nothing."""
    return obj.etype == "ET_DYN" and obj.interp is None and not obj.defined


def probe_ahead_candidates(cfg: VerifyConfig, paths: list[Path]) -> list[Path]:
    """Of the tree's ELF files (real paths), those the lldb probe will likely read: own files
    in the prefix of a debug build type. verify/engine.py starts the probe on the ones whose
    content is new (no verdict of theirs can be recorded) before it hashes and reads them."""
    if cfg.build_type not in DEBUG_TYPES or "debug_info" in cfg.rules.skip \
            or cfg.lldb_deb_root is None or cfg.interpreter is None:
        return []
    prefix = cfg.prefix.resolve()
    out = []
    for p in paths:
        try:
            in_prefix = p.relative_to(prefix).as_posix()
        except ValueError:
            continue
        if _own(in_prefix, cfg.rules.own_libs):
            out.append(p)
    return out


def _shown(path: str, prefix: Path) -> str:
    """A path inside the artifact relative to its prefix, any other as it is."""
    try:
        return Path(path).resolve().relative_to(prefix.resolve()).as_posix()
    except ValueError:
        return path


def check_debug_info(st: State) -> list[Finding]:
    """relwithdebinfo/debug: own libraries carry DWARF made with -g and the expected -O;
    release: none. meta/CMakeCache.txt records the expected build type."""
    cfg = st.config
    out: list[Finding] = []
    bt = cfg.build_type
    expect_debug = bt in DEBUG_TYPES
    want_o = cfg.rules.opt_level.get(cfg.variant, DEFAULT_OPT.get(bt or "", ""))
    readable: dict[str, tuple[ElfInfo, list[str]]] = {}   # for lldb: rel -> (obj, producers)
    for rel, obj in st.objects.items():
        facts = debug_facts(obj.path, obj)
        st.facts[rel].debug_info = facts.has_debug_info
        st.facts[rel].producers = list(facts.producers[:8])
        try:
            in_prefix = obj.path.resolve().relative_to(cfg.prefix.resolve()).as_posix()
        except ValueError:
            continue
        if bt is None or not _own(in_prefix, cfg.rules.own_libs):
            continue
        if expect_debug:
            lacking = [s for s, has in ((".debug_info", facts.has_debug_info),
                                        (".debug_line", facts.has_debug_line)) if not has]
            if lacking and code_free_library(obj):
                # e.g. PyTorch's libtorch.so and libtorch_global_deps.so: built from an empty
                # file (they only pull in their DT_NEEDED), GCC writes no compile unit for it.
                out.append(Finding(check="debug_info", severity="info", file=rel,
                                   cause=f"{rel} exports no definitions (a library of no code of "
                                         "its own): no DWARF expected"))
                continue
            if lacking:
                out.append(Finding(check="debug_info", severity="fail", file=rel,
                                   cause=f"variant {cfg.variant} ({bt}) expects DWARF but {rel} has no "
                                         f"{' and no '.join(lacking)}"))
                continue
            if facts.missing_dwo:
                out.append(Finding(check="debug_info", severity="fail", file=rel,
                                   cause=f"{len(facts.missing_dwo)} of {len(facts.dwo_files)} split-DWARF "
                                         f"unit(s) of {rel} name a .dwo that is not there, e.g. "
                                         f"{_shown(facts.missing_dwo[0], cfg.prefix)}: the debugger reads "
                                         "their variables from it (a variant's split_dwarf places each "
                                         "library's .dwo files in .dwo/ beside it)"))
                continue
            compilers = [p for p in facts.producers if _COMPILER_PRODUCER.match(p)]
            flags = [(p, *producer_flags(p)) for p in compilers]
            no_g = [p for p, has_g, _ in flags if not has_g]
            if no_g:
                out.append(Finding(check="debug_info", severity="fail", file=rel,
                                   cause=f"DW_AT_producer lacks -g: {no_g[0]!r}"))
                continue
            readable[rel] = (obj, compilers)
            if want_o and flags:
                other = [(p, lvl) for p, _, lvl in flags if lvl != want_o]
                if len(other) == len(flags):  # no unit at the expected level: the variant is wrong
                    p, lvl = other[0]
                    out.append(Finding(check="debug_info", severity="fail", file=rel,
                                       cause=f"variant {cfg.variant} expects -O{want_o} but DW_AT_producer "
                                             f"says -O{lvl}: {p!r}"))
                elif other:  # per-file flags (e.g. -O3 kernels) inside an otherwise right build
                    out.append(Finding(check="debug_info", severity="warn", file=rel,
                                       cause=f"{len(other)} of {len(flags)} compile units examined use "
                                             f"-O{other[0][1]} instead of -O{want_o}: {other[0][0]!r}"))
        elif facts.has_debug_info and not _own(in_prefix, cfg.rules.release_debug_allowed):
            out.append(Finding(check="debug_info", severity="fail", file=rel,
                               cause=f"variant {cfg.variant} ({bt}) must not carry debug info but {rel} "
                                     "has .debug_info (allow it with verify.release_debug_allowed)"))
    out += _check_lldb_reads(cfg, readable, optimized=want_o != "0", ahead=st.probe_ahead)
    if cfg.cmake:
        out += _check_cmake_cache(cfg)
    return out


def _probe_results(cfg: VerifyConfig, paths: list[str],
                   ahead: StartedProbe | None) -> dict[str, dict[str, Any]]:
    """The probe's results for `paths`: those the probe started ahead (verify/engine.py)
    covers from it, the others from a probe run now. An ahead probe that failed as a whole
    (it also ran on files this check does not probe) is not trusted: all are probed now."""
    assert cfg.lldb_deb_root is not None and cfg.interpreter is not None
    covered = {str(p) for p in ahead.libs} if ahead is not None else set()
    results: dict[str, dict[str, Any]] = {}
    if ahead is not None and covered & set(paths):
        try:
            results = {p: r for p, r in ahead.result().items() if p in paths}
        except RuntimeError:
            covered = set()
    rest = [Path(p) for p in paths if p not in covered]
    if rest:
        results.update(probe(cfg.lldb_deb_root, cfg.interpreter.path, rest))
    return results


def _check_lldb_reads(cfg: VerifyConfig, libs: dict[str, tuple[ElfInfo, list[str]]],
                      optimized: bool, ahead: StartedProbe | None = None) -> list[Finding]:
    """The pinned lldb-14, headless, on a sample of each library's functions with parameters:
    a function it cannot find or whose parameters it cannot name and locate fails, naming
    the flags the variant lacks. In optimized code a few parameters the optimizer left no
    location at entry are an info finding (lldb_reading's docstring)."""
    if cfg.lldb_deb_root is None or cfg.interpreter is None or not libs:
        return []
    paths = {str(obj.path): rel for rel, (obj, _) in libs.items()}
    try:
        results = _probe_results(cfg, list(paths), ahead)
    except subprocess.TimeoutExpired:
        return [Finding(check="debug_info", severity="warn", file="",
                        cause=f"the pinned lldb-14 did not finish reading {len(paths)} libraries "
                              f"in {PROBE_TIMEOUT_S} s: their debug info is not proven readable")]
    except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as e:
        return [Finding(check="debug_info", severity="fail", file="",
                        cause=f"the pinned lldb-14 could not be run on the libraries: {e}")]
    out = []
    for path, result in results.items():
        rel = paths[path]
        bad = unreadable(result, optimized)
        if bad is None:
            gone = optimized_out(result) if optimized else []
            if gone:
                out.append(Finding(check="debug_info", severity="info", file=rel,
                                   cause=f"{len(gone)} of {len(result.get('functions', []))} "
                                         f"sampled functions have a parameter the optimizer left "
                                         f"no location at entry, e.g. {gone[0].function} "
                                         f"({gone[0].where}): {gone[0].missing}"))
            continue
        add = flags_to_add(libs[rel][1])
        fix = (f"add cflags = {json.dumps(add)} to [variants.{cfg.variant}] of {_recipe_file(cfg)}"
               if add else
               "its flags already carry " + " ".join(LLDB14_FLAGS) + "; build it with -O0 (a debug variant)")
        out.append(Finding(check="debug_info", severity="fail", file=rel,
                           cause=f"the pinned lldb-14 cannot read {bad.function} ({bad.where}): "
                                 f"{bad.missing}; {fix}"))
    return out


def _recipe_file(cfg: VerifyConfig) -> str:
    """recipes/<recipe>.toml from the artifact name `<id>-<recipe>-<variant>`."""
    m = re.fullmatch(rf"[0-9a-f]{{40}}-(.+)-{re.escape(cfg.variant)}", cfg.artifact)
    return f"recipes/{m.group(1)}.toml" if m else "the recipe"


def _check_cmake_cache(cfg: VerifyConfig) -> list[Finding]:
    cache = cfg.root / "meta" / "CMakeCache.txt"
    if not cache.is_file():
        return [Finding(check="debug_info", severity="fail", file="meta/CMakeCache.txt",
                        cause="meta/CMakeCache.txt is missing; the build type cannot be confirmed")]
    values: dict[str, str] = {}
    for line in cache.read_text(errors="replace").splitlines():
        m = re.match(r"^([A-Za-z_0-9.-]+):[A-Z_]+=(.*)$", line)
        if m:
            values[m.group(1)] = m.group(2)
    expected = dict(cfg.rules.cmake_cache)
    if cfg.build_type:
        expected["CMAKE_BUILD_TYPE"] = cfg.build_type
    out = []
    for key, want in expected.items():
        got = values.get(key)
        if got != want:
            out.append(Finding(check="debug_info", severity="fail", file="meta/CMakeCache.txt",
                               cause=f"{key} is {got!r}, expected {want!r} for variant {cfg.variant}"))
    return out
