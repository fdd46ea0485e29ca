"""The portability check: symbol-version ceilings and RPATH/RUNPATH entries that point
into the build tree, /tmp or a home directory."""
from __future__ import annotations

import re
from pathlib import Path

from orchestrator.verify.checks.state import State
from orchestrator.verify.elf import ElfInfo
from orchestrator.verify.inputs import VerifyConfig
from orchestrator.verify.report import Finding

HOME_RE = re.compile(r"^(/home/[^/]+|/root)(/|$)")


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
        st.facts[rel].max_versions = max_versions(obj)
    # Reused files too: whether an entry points into the stage depends on this run's path.
    for rel, facts in [*st.facts.items(), *st.reused.items()]:
        mv = facts.max_versions
        for family, limit in cfg.rules.max_versions.items():
            if family in mv and vkey(mv[family]) > vkey(limit):
                out.append(Finding(check="portability", severity="fail", file=rel,
                                   cause=f"needs {family}_{mv[family]}, above the recipe's maximum {family}_{limit}"))
        for kind, entries in (("RUNPATH", facts.runpath), ("RPATH", facts.rpath)):
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
