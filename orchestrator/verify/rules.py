"""The checks. Each takes the run's state and returns findings naming a file and a cause."""
from __future__ import annotations

import bisect
import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.verify.config import BASE_SYSTEM_LIBS, VerifyConfig
from orchestrator.verify.demangle import demangle
from orchestrator.verify.elf import ElfInfo, Undefined, debug_facts, fatbin_images
from orchestrator.verify.gnuhash import gnu_hash
from orchestrator.verify.report import FileFacts, Finding
from orchestrator.verify.resolve import Closure, Resolver, realpath, within

LIBPYTHON_RE = re.compile(r"^libpython\d+\.\d+[a-z]*\.so(\.\d+)*$")
MAX_SYMBOLS_PER_FILE = 50
HOME_RE = re.compile(r"^(/home/[^/]+|/root)(/|$)")


@dataclass
class State:
    """What the checks share: the config, the resolver and each artifact ELF's closure."""
    config: VerifyConfig
    resolver: Resolver
    objects: dict[str, ElfInfo]  # path relative to root -> info
    closures: dict[str, Closure]
    extensions: set[str]
    facts: dict[str, FileFacts]
    unresolved: dict[str, list[Undefined]] = field(default_factory=dict)
    _blooms: dict[int, tuple | None] = field(default_factory=dict)

    def bloom(self, obj: ElfInfo) -> tuple | None:
        """obj's .gnu.hash bloom filter (None: no index, ask `defines` directly)."""
        key = id(obj)
        if key not in self._blooms:
            self._blooms[key] = obj.index.bloom() if obj.index is not None and obj._defined is None else None
        return self._blooms[key]

    def rel(self, path: Path) -> str:
        """A path as the report shows it: relative to the artifact when inside it."""
        real, root = realpath(str(path)), realpath(str(self.config.root))
        return real[len(root) + 1:] if real.startswith(root + "/") else str(path)

    def zone(self, path: Path) -> str:
        """'artifact', 'toolchain' or 'system' for a resolved library path."""
        real = realpath(str(path))
        if within(real, realpath(str(self.config.root))):
            return "artifact"
        for d in self.config.toolchain_dirs:
            if within(real, realpath(str(d))) or within(str(path), str(d)):
                return "toolchain"
        return "system"

    def torch_label(self, lib: ElfInfo) -> str:
        """'torch 2.13.0 (libc10.so)' for a library of the locked torch, else its file name."""
        t = self.config.torch
        if t and t.lib_dir and within(realpath(str(lib.path)), realpath(str(t.lib_dir))):
            return f"torch {t.version} ({lib.path.name})"
        return lib.path.name


# 1. Resolution -----------------------------------------------------------------------------

def check_resolution(st: State) -> list[Finding]:
    """Every DT_NEEDED resolves, to the artifact, the toolchain or an allowed system library."""
    out: list[Finding] = []
    allowed = [*BASE_SYSTEM_LIBS, *st.config.rules.allowed_system_libs]
    seen: set[tuple[str, str]] = set()
    own = {o.path for o in st.objects.values()}
    for rel, closure in st.closures.items():
        for e in closure.edges:
            key = (str(e.needed_by), e.soname)
            if key in seen:
                continue
            seen.add(key)
            who = st.rel(e.needed_by)
            if e.path is None:
                out.append(Finding(check="resolution", severity="fail", file=who,
                                   cause=f"{e.soname} (needed by {who}) not found; searched: "
                                         + (":".join(e.tried) or "(nothing)"),
                                   detail={"soname": e.soname, "needed_by": who, "searched": e.tried}))
                continue
            if e.needed_by not in own:
                continue
            zone = st.zone(e.path)
            if zone == "system" and not any(fnmatch.fnmatchcase(e.soname, p) for p in allowed):
                out.append(Finding(check="resolution", severity="fail", file=who,
                                   cause=f"{e.soname} resolves to the system's {e.path}, which is "
                                         "not in the artifact, the locked toolchain, or the recipe's "
                                         "verify.allowed_system_libs",
                                   detail={"soname": e.soname, "path": str(e.path)}))
    return out


# 2. Symbols --------------------------------------------------------------------------------

def check_symbols(st: State) -> list[Finding]:
    """Every non-weak undefined dynamic symbol is defined in the closure (at its version)."""
    out: list[Finding] = []
    for rel, obj in st.objects.items():
        closure = st.closures[rel]
        others = [o for o in closure.objects if o is not obj]
        by_soname: dict[str, ElfInfo] = {}
        for o in closure.objects:
            by_soname.setdefault(o.soname or o.path.name, o)
        missing = []
        # Each provider's .gnu.hash bloom filter rejects most names with one word test.
        blooms = [st.bloom(o) for o in others]
        for u in obj.undefined:
            # A versioned reference names its library: ask that one first (usually the answer).
            first = by_soname.get(u.version_file) if u.version_file else None
            if first is not None and first is not obj and first.defines(u.name, u.version):
                continue
            h = gnu_hash(u.name)
            for o, bl in zip(others, blooms):
                if bl is not None:
                    words, size, shift, bits = bl
                    if not size or not ((words[(h // bits) % size] >> (h % bits))
                                        & (words[(h // bits) % size] >> ((h >> shift) % bits)) & 1):
                        continue
                if o is not first and o.defines(u.name, u.version):
                    break
            else:
                missing.append(u)
        st.unresolved[rel] = missing
        for file, versions in sorted(obj.version_needs.items()):
            lib = by_soname.get(file)
            if lib is None:
                continue  # reported by resolution
            lacking = sorted(v for v in versions if v not in lib.verdefs)
            if lacking and lib.has_verdef:
                out.append(Finding(check="symbols", severity="fail", file=rel,
                                   cause=f"{file} ({lib.path}) does not define version(s) "
                                         f"{', '.join(lacking)} required by {rel}",
                                   detail={"library": str(lib.path), "versions": lacking}))
        if not missing:
            continue
        names = [o.path.name for o in others]
        where = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        where = where or "(no libraries)"
        for u in missing[:MAX_SYMBOLS_PER_FILE]:
            ver = f"@{u.version}" if u.version else ""
            out.append(Finding(check="symbols", severity="fail", file=rel,
                               cause=f"undefined symbol {demangle(u.name)}{ver} needed by {rel} "
                                     f"is defined nowhere in its closure (looked in: {where})",
                               detail={"symbol": u.name.decode(errors="replace"),
                                       "demangled": demangle(u.name), "version": u.version,
                                       "looked_in": [str(o.path) for o in others]}))
        if len(missing) > MAX_SYMBOLS_PER_FILE:
            out.append(Finding(check="symbols", severity="fail", file=rel,
                               cause=f"... and {len(missing) - MAX_SYMBOLS_PER_FILE} more undefined symbols",
                               detail={"count": len(missing)}))
    return out


# 3. C++ ABI --------------------------------------------------------------------------------

_OLD_ABI = re.compile(r"(?<!__cxx11::)\bstd::(string|basic_string<|basic_(i|o)?stringstream<|"
                      r"(i|o)?stringstream\b|list<)")


def symbol_abi(name: bytes) -> str | None:
    """'1' for a symbol using the C++11 std::string ABI, '0' for the old one, None: neither."""
    if b"__cxx11" in name or b"B5cxx11" in name:
        return "1"
    if not name.startswith(b"_Z") or (b"Ss" not in name and b"basic_string" not in name
                                      and b"stringstream" not in name and b"St4list" not in name):
        return None
    return "0" if _OLD_ABI.search(demangle(name)) else None


def object_abi(obj: ElfInfo) -> str | None:
    """The _GLIBCXX_USE_CXX11_ABI an object was built with, judged from the symbols it uses."""
    seen = set()
    for u in obj.undefined:
        a = symbol_abi(u.name)
        if a:
            seen.add(a)
            if len(seen) == 2:
                return "mixed"
    if not seen:
        for name in obj.defined:
            a = symbol_abi(name)
            if a:
                seen.add(a)
                if len(seen) == 2:
                    return "mixed"
    return seen.pop() if len(seen) == 1 else None


def _name_prefix(mangled: bytes) -> bytes | None:
    """The mangled qualified name (e.g. b'_ZN3c106detail14torchCheckFail'), without types."""
    if not mangled.startswith(b"_Z"):
        return None
    p = 2
    nested = mangled[p:p + 1] == b"N"
    if nested:
        p += 1
        while mangled[p:p + 1] in (b"K", b"V", b"r", b"R", b"O"):
            p += 1
        if mangled[p:p + 2] == b"St":
            p += 2
    start = p
    while p < len(mangled) and mangled[p:p + 1].isdigit():
        q = p
        while q < len(mangled) and mangled[q:q + 1].isdigit():
            q += 1
        n = int(mangled[p:q])
        p = q + n
        if not nested:
            break
    return mangled[:p] if p > start else None


class _SortedNames:
    """Each library's defined names, sorted once, for prefix lookups."""

    def __init__(self) -> None:
        self._cache: dict[int, list[bytes]] = {}

    def with_prefix(self, obj: ElfInfo, prefix: bytes) -> list[bytes]:
        names = self._cache.get(id(obj))
        if names is None:
            names = self._cache[id(obj)] = sorted(obj.defined)
        i = bisect.bisect_left(names, prefix)
        out = []
        while i < len(names) and names[i].startswith(prefix):
            out.append(names[i])
            i += 1
        return out


def check_cxx_abi(st: State) -> list[Finding]:
    """An object whose std::string ABI differs from the libraries it uses (or from torch's)."""
    out: list[Finding] = []
    sorted_names = _SortedNames()
    for rel, obj in st.objects.items():
        abi = object_abi(obj)
        st.facts[rel].cxx11_abi = abi
        closure = st.closures[rel]
        reported = False
        # c10 symbols first: they name the most basic torch library in the message.
        unresolved = sorted(st.unresolved.get(rel, []), key=lambda u: not u.name.startswith(b"_ZN3c10"))
        for u in unresolved:
            mine = symbol_abi(u.name)
            prefix = _name_prefix(u.name)
            if mine is None or prefix is None:
                continue
            for lib in closure.objects:
                if lib is obj:
                    continue
                cands = [c for c in sorted_names.with_prefix(lib, prefix)
                         if symbol_abi(c) not in (None, mine)]
                if not cands:
                    continue
                theirs = "1" if mine == "0" else "0"
                out.append(Finding(
                    check="cxx_abi", severity="fail", file=rel,
                    cause=f"{obj.path.name} was built with _GLIBCXX_USE_CXX11_ABI={mine} but "
                          f"{st.torch_label(lib)} uses {theirs}: it needs {demangle(u.name)} "
                          f"while {lib.path.name} exports {demangle(cands[0])}",
                    detail={"object_abi": mine, "library": str(lib.path), "library_abi": theirs,
                            "symbol": u.name.decode(errors="replace"),
                            "library_symbol": cands[0].decode(errors="replace")}))
                reported = True
                break
            if reported:
                break
        t = st.config.torch
        if not reported and t is not None and abi in ("0", "1") and abi != ("1" if t.cxx11_abi else "0"):
            uses_torch = t.lib_dir is not None and any(
                within(realpath(str(o.path)), realpath(str(t.lib_dir))) for o in closure.objects)
            if uses_torch:
                out.append(Finding(
                    check="cxx_abi", severity="fail", file=rel,
                    cause=f"{obj.path.name} was built with _GLIBCXX_USE_CXX11_ABI={abi} but the "
                          f"locked torch {t.version} uses {int(t.cxx11_abi)}",
                    detail={"object_abi": abi, "torch_abi": int(t.cxx11_abi)}))
        if abi == "mixed":
            out.append(Finding(check="cxx_abi", severity="warn", file=rel,
                               cause=f"{obj.path.name} uses both the old and the C++11 std::string ABI"))
    return out


# 4. Python ---------------------------------------------------------------------------------

def is_extension(rel: str, obj: ElfInfo, cfg: VerifyConfig) -> bool:
    """A CPython extension module: under a python dir with PyInit_, or a cpython/abi3 suffix."""
    name = obj.path.name
    if ".cpython-" in name or name.endswith(".abi3.so"):
        return True
    in_python = any(within(realpath(str(obj.path)), realpath(str(d))) for d in cfg.python_dirs)
    return in_python and obj.defines(b"PyInit_" + name.split(".")[0].encode(), None)


def check_python(st: State) -> list[Finding]:
    """Extension modules link no libpython (unless policy allows the locked one's) and carry
    the locked interpreter's suffix."""
    out: list[Finding] = []
    interp = st.config.interpreter
    policy = st.config.rules.libpython
    for rel in sorted(st.extensions):
        obj = st.objects[rel]
        for soname in obj.needed:
            if not LIBPYTHON_RE.match(soname):
                continue
            if policy == "interpreter" and interp and soname == interp.libpython_soname:
                continue
            why = ("the recipe's policy (verify.libpython = \"forbid\") forbids any libpython"
                   if policy == "forbid" else
                   f"only the locked interpreter's {interp.libpython_soname if interp else '(none)'} is allowed")
            out.append(Finding(check="python", severity="fail", file=rel,
                               cause=f"extension module links {soname}; {why}",
                               detail={"soname": soname, "policy": policy}))
        if interp is not None:
            name = obj.path.name
            if not (name.endswith(interp.ext_suffix) or name.endswith(".abi3.so")):
                out.append(Finding(check="python", severity="fail", file=rel,
                                   cause=f"extension module suffix of {name} does not match the locked "
                                         f"Python {interp.version} ({interp.ext_suffix})",
                                   detail={"expected_suffix": interp.ext_suffix}))
    return out


# 5. Debug info -----------------------------------------------------------------------------

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


def _own(rel_prefix: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(rel_prefix, p) or fnmatch.fnmatch("x/" + rel_prefix, p)
               for p in patterns)


def check_debug_info(st: State) -> list[Finding]:
    """relwithdebinfo/debug: own libraries carry DWARF made with -g and the expected -O;
    release: none. meta/CMakeCache.txt records the expected build type."""
    cfg = st.config
    out: list[Finding] = []
    bt = cfg.build_type
    expect_debug = bt in DEBUG_TYPES
    want_o = cfg.rules.opt_level.get(cfg.variant, DEFAULT_OPT.get(bt or "", ""))
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
            if lacking:
                out.append(Finding(check="debug_info", severity="fail", file=rel,
                                   cause=f"variant {cfg.variant} ({bt}) expects DWARF but {rel} has no "
                                         f"{' and no '.join(lacking)}"))
                continue
            compilers = [p for p in facts.producers if _COMPILER_PRODUCER.match(p)]
            flags = [(p, *producer_flags(p)) for p in compilers]
            no_g = [p for p, has_g, _ in flags if not has_g]
            if no_g:
                out.append(Finding(check="debug_info", severity="fail", file=rel,
                                   cause=f"DW_AT_producer lacks -g: {no_g[0]!r}"))
            elif want_o and flags:
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
    if cfg.cmake:
        out += _check_cmake_cache(cfg)
    return out


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


# 6. Portability ----------------------------------------------------------------------------

def vkey(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def max_versions(obj: ElfInfo) -> dict[str, str]:
    """Highest GLIBC_/GLIBCXX_/CXXABI_ version the object needs."""
    best: dict[str, str] = {}
    for versions in obj.version_needs.values():
        for v in versions:
            m = re.fullmatch(r"(GLIBC|GLIBCXX|CXXABI)_(\d+(?:\.\d+)*)", v)
            if m and (m.group(1) not in best or vkey(m.group(2)) > vkey(best[m.group(1)])):
                best[m.group(1)] = m.group(2)
    return best


def check_portability(st: State) -> list[Finding]:
    """Version ceilings, and RPATH/RUNPATH entries into the build tree, /tmp or a home."""
    cfg = st.config
    out: list[Finding] = []
    for rel, obj in st.objects.items():
        mv = max_versions(obj)
        st.facts[rel].max_versions = mv
        for family, limit in cfg.rules.max_versions.items():
            if family in mv and vkey(mv[family]) > vkey(limit):
                out.append(Finding(check="portability", severity="fail", file=rel,
                                   cause=f"needs {family}_{mv[family]}, above the recipe's maximum {family}_{limit}"))
        for kind, entries in (("RUNPATH", obj.runpath), ("RPATH", obj.rpath)):
            for e in entries:
                why = _bad_path(e, cfg)
                if why:
                    out.append(Finding(check="portability", severity="fail", file=rel,
                                       cause=f"{kind} entry {e!r} points into {why}",
                                       detail={"entry": e, "kind": kind}))
    return out


def _bad_path(entry: str, cfg: VerifyConfig) -> str | None:
    if "$ORIGIN" in entry or "${ORIGIN}" in entry or not entry.startswith("/"):
        return None
    p = Path(entry)
    for b in cfg.build_dirs:
        if p == b or p.is_relative_to(b):
            return f"the build directory {b}"
    if any(p.is_relative_to(d) for d in cfg.toolchain_dirs):
        return None
    if p.is_relative_to(cfg.root):
        return f"the staging directory {cfg.root}"
    if entry == "/tmp" or entry.startswith(("/tmp/", "/var/tmp/")):
        return "/tmp"
    if HOME_RE.match(entry):
        return "a home directory"
    return None


# 7. Required symbols -----------------------------------------------------------------------

def check_required_symbols(st: State) -> list[Finding]:
    """Each library named in verify.required_symbols exports a match for each pattern."""
    cfg = st.config
    out: list[Finding] = []
    for lib, patterns in cfg.rules.required_symbols.items():
        path = cfg.prefix / lib
        rel = st.rel(path)
        if not path.is_file():
            out.append(Finding(check="required_symbols", severity="fail", file=rel,
                               cause=f"{lib} (named in verify.required_symbols) is not in the prefix"))
            continue
        obj = st.resolver.elf(path)
        names = [demangle(n) for n in obj.defined]
        for pat in patterns:
            if not any(fnmatch.fnmatchcase(n, pat) for n in names):
                out.append(Finding(check="required_symbols", severity="fail", file=rel,
                                   cause=f"{lib} exports no symbol matching {pat!r}",
                                   detail={"pattern": pat}))
    return out


# 8. CUDA -----------------------------------------------------------------------------------

def expected_cuda_images(spec: str) -> set[str] | None:
    """CMake CUDA_ARCHITECTURES ("80;90-real;90-virtual") as {"sm_80", "compute_80", ...};
    None for values that name no fixed list (all, native)."""
    out: set[str] = set()
    for item in re.split(r"[;,\s]+", spec.strip()):
        if not item:
            continue
        if item in ("all", "all-major", "native", "OFF"):
            return None
        m = re.fullmatch(r"(\d+)[a-z]?(?:-(real|virtual))?", item)
        if not m:
            raise ValueError(f"CUDA architecture {item!r} is not in CMake's form (e.g. 80, 90-real)")
        arch, kind = m.group(1), m.group(2)
        if kind in (None, "real"):
            out.add(f"sm_{arch}")
        if kind in (None, "virtual"):
            out.add(f"compute_{arch}")
    return out


def check_cuda(st: State) -> list[Finding]:
    """The sm_XX/compute_XX images embedded in each fatbin match the variant's arch list."""
    cfg = st.config
    spec = cfg.rules.cuda_architectures.get(cfg.variant)
    if spec is None and "CMAKE_CUDA_ARCHITECTURES" in cfg.defines:
        spec = str(cfg.defines["CMAKE_CUDA_ARCHITECTURES"])
    expected = expected_cuda_images(spec) if spec else None
    out: list[Finding] = []
    any_fatbin = False
    for rel, obj in st.objects.items():
        images = fatbin_images(obj.path, obj)
        if not images:
            continue
        any_fatbin = True
        got = {str(i) for i in images}
        st.facts[rel].cuda = sorted(got)
        if expected is None:
            continue
        extra, lacking = sorted(got - expected), sorted(expected - got)
        if extra or lacking:
            parts = []
            if lacking:
                parts.append(f"lacks {', '.join(lacking)}")
            if extra:
                parts.append(f"has unexpected {', '.join(extra)}")
            out.append(Finding(check="cuda", severity="fail", file=rel,
                               cause=f"fatbin embeds {', '.join(sorted(got))} but variant {cfg.variant} "
                                     f"asks for CUDA architectures {spec!r}: {'; '.join(parts)}",
                               detail={"embedded": sorted(got), "expected": sorted(expected)}))
    if expected and not any_fatbin:
        out.append(Finding(check="cuda", severity="fail", file="prefix",
                           cause=f"variant {cfg.variant} asks for CUDA architectures {spec!r} but no "
                                 "file carries a .nv_fatbin section"))
    return out


ALL_CHECKS = {
    "resolution": check_resolution,
    "symbols": check_symbols,
    "cxx_abi": check_cxx_abi,  # after symbols: uses the unresolved symbols
    "python": check_python,
    "debug_info": check_debug_info,
    "portability": check_portability,
    "required_symbols": check_required_symbols,
    "cuda": check_cuda,
}
