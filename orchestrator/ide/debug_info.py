"""Whether the active artifact's shared libraries carry DWARF line tables (can a breakpoint
bind to a source line), read with verify's ELF and DWARF readers."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from orchestrator.verify.checks.debug_info import code_free_library
from orchestrator.verify.dwarf import debug_facts
from orchestrator.verify.elf import is_elf, read_elf


def has_line_tables(path: Path) -> bool:
    """True when the ELF file carries DWARF line tables (.debug_line)."""
    return debug_facts(path, read_elf(path, symbols=False), max_units=0).has_debug_line


def debug_info_report(artifact: Path) -> dict[str, bool]:
    """Shared library (relative to the artifact) -> has DWARF line tables. A library that
    exports nothing (no code of its own, e.g. PyTorch's libtorch.so) is left out: there is
    no source line to bind to whatever the variant."""
    out: dict[str, bool] = {}
    for p in sorted((artifact / "prefix").rglob("*.so*")):
        if p.is_file() and not p.is_symlink() and is_elf(p):
            lines = has_line_tables(p)
            if lines or not code_free_library(read_elf(p)):
                out[p.relative_to(artifact).as_posix()] = lines
    return out


def debug_info_note(variant: str, report: Mapping[str, bool]) -> str:
    """One line saying whether breakpoints in this artifact can bind to source lines."""
    without = [Path(k).name for k, v in report.items() if not v]
    if not report:
        return f"{variant}: no shared libraries in the artifact"
    if not without:
        return f"{variant}: DWARF line tables in all {len(report)} libraries: breakpoints bind to source lines"
    return (f"{variant}: no DWARF line tables in {', '.join(without)}: breakpoints there bind to "
            "symbols only, never to a source line (built without -g); use variant=relwithdebinfo "
            "or debug to step through source")
