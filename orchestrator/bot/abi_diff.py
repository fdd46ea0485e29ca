"""ABI of an artifact (per ELF file: exported dynamic symbols, SONAME, DT_NEEDED, highest
GLIBC/GLIBCXX needed, size) and the diff between two nights, like abidiff's verdicts: a
removed exported symbol (or a changed SONAME) is an incompatible change, a regression.

Summaries are stored once per artifact id under <reports>/abi/<id>.json (same id, same bytes),
so the history stays small; symbols are kept mangled and only a diff's names are demangled.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from orchestrator.fs import write_atomic
from orchestrator.hashing import pretty_json
from orchestrator.verify.elf import is_elf, read_elf

VERSION_RE = re.compile(r"^(GLIBC|GLIBCXX)_(\d+(?:\.\d+)*)$")


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def highest_versions(version_needs: dict[str, set[str]]) -> dict[str, str]:
    """{"GLIBC": "2.34", "GLIBCXX": "3.4.30"}: the highest of each needed."""
    best: dict[str, str] = {}
    for names in version_needs.values():
        for n in names:
            m = VERSION_RE.match(n)
            if m and (m[1] not in best or _vkey(m[2]) > _vkey(best[m[1]])):
                best[m[1]] = m[2]
    return best


def summarize(artifact: Path) -> dict[str, Any]:
    """{files: {prefix-relative path: {soname, needed, glibc, exports, size}}, size}."""
    prefix = artifact / "prefix"
    files: dict[str, Any] = {}
    total = 0
    for p in sorted(prefix.rglob("*")) if prefix.is_dir() else ():
        if p.is_symlink() or not p.is_file():
            continue
        size = p.stat().st_size
        total += size
        if not is_elf(p):
            continue
        info = read_elf(p, full=True)
        try:
            exports = sorted(n.decode(errors="replace") + (f"@{v}" if v else "")
                             for n, vs in info.defined.items() for v in vs)
            files[str(p.relative_to(prefix))] = {
                "soname": info.soname, "needed": list(info.needed), "size": size,
                "glibc": highest_versions(info.version_needs), "exports": exports}
        finally:
            info.close()
    return {"files": files, "size": total}


def abi_path(reports: Path, artifact_id: str) -> Path:
    return reports / "abi" / f"{artifact_id}.json"


def store_summary(reports: Path, artifact_id: str, artifact: Path) -> dict[str, Any]:
    """Summarize once per id; the caller keeps only the id in the cell result."""
    path = abi_path(reports, artifact_id)
    if path.is_file():
        return json.loads(path.read_text())
    summary = summarize(artifact)
    write_atomic(path, pretty_json(summary))
    return summary


def load_summary(reports: Path, artifact_id: str | None) -> dict[str, Any] | None:
    if not artifact_id:
        return None
    path = abi_path(reports, artifact_id)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def demangle(names: list[str]) -> dict[str, str]:
    """Mangled (optionally @version) -> demangled, through binutils' c++filt in one call."""
    if not names or shutil.which("c++filt") is None:
        return {n: n for n in names}
    bare = [n.split("@", 1) for n in names]
    proc = subprocess.run(["c++filt"], input="\n".join(b[0] for b in bare) + "\n",
                          capture_output=True, text=True)
    out = proc.stdout.splitlines() if proc.returncode == 0 else []
    if len(out) != len(names):
        return {n: n for n in names}
    return {n: d + (f"@{b[1]}" if len(b) > 1 else "") for n, d, b in zip(names, out, bare, strict=False)}


def diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Per file: symbols added/removed (demangled), SONAME/DT_NEEDED/GLIBC changes, size delta.

    `regressions` lists the incompatible changes: a removed exported symbol, a changed SONAME,
    a library that went away, a higher GLIBC/GLIBCXX requirement.
    """
    files: dict[str, Any] = {}
    regressions: list[str] = []
    added_all: list[str] = []
    removed_all: list[str] = []
    for path in sorted(set(old["files"]) | set(new["files"])):
        a, b = old["files"].get(path), new["files"].get(path)
        if a is None or b is None:
            files[path] = {"status": "added" if a is None else "removed"}
            if b is None and a.get("soname"):
                regressions.append(f"{path}: library removed")
            continue
        ea, eb = set(a["exports"]), set(b["exports"])
        entry: dict[str, Any] = {"status": "changed", "added": sorted(eb - ea), "removed": sorted(ea - eb),
                                 "size_delta": b["size"] - a["size"]}
        added_all += entry["added"]
        removed_all += entry["removed"]
        if a.get("soname") != b.get("soname"):
            entry["soname"] = [a.get("soname"), b.get("soname")]
            regressions.append(f"{path}: SONAME {a.get('soname')} → {b.get('soname')}")
        na, nb = a.get("needed", []), b.get("needed", [])
        if na != nb:
            entry["needed"] = {"added": [n for n in nb if n not in na],
                               "removed": [n for n in na if n not in nb]}
        for lib in ("GLIBC", "GLIBCXX"):
            va, vb = a.get("glibc", {}).get(lib), b.get("glibc", {}).get(lib)
            if va != vb:
                entry.setdefault("glibc", {})[lib] = [va, vb]
                if va and vb and _vkey(vb) > _vkey(va):
                    regressions.append(f"{path}: needs {lib}_{vb} (was {lib}_{va})")
        if not (entry["added"] or entry["removed"] or entry["size_delta"] or len(entry) > 4):
            entry["status"] = "same"
        files[path] = entry
    names = demangle(sorted(set(added_all + removed_all)))
    for path, entry in files.items():
        for k in ("added", "removed"):
            if k in entry:
                entry[k] = [names.get(n, n) for n in entry[k]]
        for sym in entry.get("removed", []):
            regressions.append(f"{path}: exported symbol removed: {sym}")
    return {"files": {p: e for p, e in files.items() if e["status"] != "same"},
            "size_delta": new["size"] - old["size"], "regressions": regressions,
            "added": len(added_all), "removed": len(removed_all)}


def highest_glibc(summary: dict[str, Any]) -> dict[str, str]:
    """The highest GLIBC/GLIBCXX any file of the artifact needs."""
    best: dict[str, str] = {}
    for f in summary["files"].values():
        for lib, v in f.get("glibc", {}).items():
            if lib not in best or _vkey(v) > _vkey(best[lib]):
                best[lib] = v
    return best
