"""The C++ ABI check: an object's _GLIBCXX_USE_CXX11_ABI against its libraries' and torch's."""
from __future__ import annotations

import bisect
import re

from orchestrator.verify.checks.state import State
from orchestrator.verify.demangle import demangle
from orchestrator.verify.elf import ElfInfo
from orchestrator.verify.report import Abi, Finding
from orchestrator.verify.resolve import realpath, within

_OLD_ABI = re.compile(r"(?<!__cxx11::)\bstd::(string|basic_string<|basic_(i|o)?stringstream<|"
                      r"(i|o)?stringstream\b|list<)")


def symbol_abi(name: bytes) -> Abi | None:
    """'1' for a symbol using the C++11 std::string ABI, '0' for the old one, None: neither."""
    if b"__cxx11" in name or b"B5cxx11" in name:
        return "1"
    if not name.startswith(b"_Z") or (b"Ss" not in name and b"basic_string" not in name
                                      and b"stringstream" not in name and b"St4list" not in name):
        return None
    return "0" if _OLD_ABI.search(demangle(name)) else None


def object_abi(obj: ElfInfo) -> Abi | None:
    """The _GLIBCXX_USE_CXX11_ABI an object was built with, judged from the symbols it uses."""
    seen: set[Abi] = set()
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
