"""Linkage checks: every DT_NEEDED resolves where allowed, every undefined symbol is
defined in the closure, and the recipe's required symbols are exported."""
from __future__ import annotations

import fnmatch

from orchestrator.verify.checks.state import State
from orchestrator.verify.demangle import demangle
from orchestrator.verify.elf import ElfInfo, Undefined
from orchestrator.verify.fork_split import both, cores
from orchestrator.verify.gnuhash import gnu_hash
from orchestrator.verify.inputs import BASE_SYSTEM_LIBS
from orchestrator.verify.report import Finding

MAX_SYMBOLS_PER_FILE = 50


# Resolution ---------------------------------------------------------------------------

def check_resolution(st: State) -> list[Finding]:
    """Every DT_NEEDED resolves, to the artifact, the toolchain or an allowed system library."""
    out: list[Finding] = []
    allowed = [*BASE_SYSTEM_LIBS, *st.config.rules.allowed_system_libs]
    seen: set[tuple[str, str]] = set()
    own = {o.path for o in st.objects.values()}
    for closure in st.closures.values():
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


# Symbols ------------------------------------------------------------------------------

# Undefined names (all files together) from which the lookups are split between this
# process and a forked child on a machine with 2+ cores: below it, the fork costs more.
SPLIT_MIN_NAMES = 2000

Span = tuple[str, int, int]  # (file, first, end): a run of one file's undefined names


def _closure_of(st: State, rel: str) -> tuple[list[ElfInfo], dict[str, ElfInfo]]:
    """rel's closure without rel itself, and its libraries by soname (the first wins)."""
    obj = st.objects[rel]
    closure = st.closures[rel]
    by_soname: dict[str, ElfInfo] = {}
    for o in closure.objects:
        by_soname.setdefault(o.soname or o.path.name, o)
    return [o for o in closure.objects if o is not obj], by_soname


def _missing(st: State, rel: str, lo: int, hi: int) -> list[int]:
    """Indices in lo..hi-1 of rel's undefined names that no library of its closure defines
    (non-weak, at the version asked for)."""
    obj = st.objects[rel]
    others, by_soname = _closure_of(st, rel)
    missing = []
    # Each provider's .gnu.hash bloom filter rejects most names with one word test. The
    # question is whether any provider defines a name, not which one ld.so binds, so the
    # provider that answered last is asked first (libtorch_python's 5,700 names mostly
    # come from two of its 16 libraries).
    providers = [(o, st.bloom(o)) for o in others]
    undefined = obj.undefined
    for k in range(lo, hi):
        u = undefined[k]
        # A versioned reference names its library: ask that one first (usually the answer).
        first = by_soname.get(u.version_file) if u.version_file else None
        if first is not None and first is not obj and first.defines(u.name, u.version):
            continue
        h = gnu_hash(u.name)
        for i, (o, bl) in enumerate(providers):
            if bl is not None:
                words, size, shift, bits = bl
                if not size or not ((words[(h // bits) % size] >> (h % bits))
                                    & (words[(h // bits) % size] >> ((h >> shift) % bits)) & 1):
                    continue
            if o is not first and o.defines(u.name, u.version, h if bl is not None else None):
                if i:
                    providers.insert(0, providers.pop(i))
                break
        else:
            missing.append(k)
    return missing


def _halves(st: State) -> tuple[list[Span], list[Span]]:
    """Every file's undefined names in two runs of (nearly) equal count, in file order."""
    total = sum(len(o.undefined) for o in st.objects.values())
    half, seen = total // 2, 0
    first: list[Span] = []
    second: list[Span] = []
    for rel, obj in st.objects.items():
        n = len(obj.undefined)
        cut = min(max(half - seen, 0), n)
        if cut:
            first.append((rel, 0, cut))
        if cut < n:
            second.append((rel, cut, n))
        seen += n
    return first, second


def missing_symbols(st: State) -> dict[str, list[Undefined]]:
    """Each file's undefined names that its closure does not define. With many names and
    2+ cores, half of the lookups run in a forked child (verify/fork_split.py)."""
    def run(spans: list[Span]) -> list[tuple[str, list[int]]]:
        return [(rel, _missing(st, rel, lo, hi)) for rel, lo, hi in spans]

    first, second = _halves(st)
    if sum(hi - lo for _, lo, hi in first + second) >= SPLIT_MIN_NAMES and cores() >= 2:
        mine, theirs = both(lambda: run(first), lambda: run(second))
        answers = mine + theirs
    else:
        answers = run(first + second)
    out: dict[str, list[Undefined]] = {rel: [] for rel in st.objects}
    for rel, indices in answers:
        undefined = st.objects[rel].undefined
        out[rel] += [undefined[k] for k in indices]
    return out


def check_symbols(st: State) -> list[Finding]:
    """Every non-weak undefined dynamic symbol is defined in the closure (at its version)."""
    out: list[Finding] = []
    missing_of = missing_symbols(st)
    for rel, obj in st.objects.items():
        others, by_soname = _closure_of(st, rel)
        missing = missing_of[rel]
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


# Required symbols ---------------------------------------------------------------------

def check_required_symbols(st: State) -> list[Finding]:
    """Each library named in verify.required_symbols exports a match for each pattern."""
    cfg = st.config
    out: list[Finding] = []
    for lib, patterns in cfg.rules.required_symbols.items():
        path = cfg.prefix / lib
        rel = st.rel(path)
        if rel in st.reused:  # its recorded verdict was made under these same rules
            continue
        if not path.is_file():
            out.append(Finding(check="required_symbols", severity="fail", file=rel,
                               cause=f"{lib} (named in verify.required_symbols) is not in the prefix"))
            continue
        obj = st.resolver.elf(path)
        for pat in patterns:  # demangled as far as the first match (demangle is cached)
            if not any(fnmatch.fnmatchcase(demangle(n), pat) for n in obj.defined):
                out.append(Finding(check="required_symbols", severity="fail", file=rel,
                                   cause=f"{lib} exports no symbol matching {pat!r}",
                                   detail={"pattern": pat}))
    return out
