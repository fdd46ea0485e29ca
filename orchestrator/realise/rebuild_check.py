"""rebuild=1 and check=1: build a present artifact again and compare it, file by file, with
the manifest of the one in the store (which is never touched).

- rebuild=1: a clean build in the variant's usual build tree (wiped first), compile cache
  as configured; the result is reported, and kept in <store>/tmp/rebuilt-<name>/ when it
  differs, for inspection (CheckFailed: exit 1).
- check=1 (Nix's --check): first the full toolchain check of `doit verify toolchain=1`
  (machine re-hashed against the lock, toolchain files against their manifest: drift is
  exit 2); then a fresh build tree at another path (<store>/tmp/check-<name>...),
  compile cache off; every file is compared by sha256, an ELF file that differs names its
  first differing section; anything different is CheckFailed (exit 1). The check's build
  tree and output are removed afterwards.

Build records in meta/ (build.log, ninja_log, CMakeCache.txt, compile_commands.json, pytorch.json,
verify.json) name the build tree and the clock, so they are listed as `record`, never
judged; every other file (prefix/ and the generated sources in meta/build/) must match.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from orchestrator.builders.context import build_tree_of
from orchestrator.config.settings import Settings
from orchestrator.console import console
from orchestrator.errors import CheckFailed
from orchestrator.fs import remove_tree
from orchestrator.model.manifest import FileEntry, Manifest
from orchestrator.plan.derivation import Plan
from orchestrator.realise.build_step import run_builder
from orchestrator.store.artifacts import Store
from orchestrator.toolchain.materialize import Toolchain, verify_toolchain_full

BUILD_ID = ".note.gnu.build-id"
Status = Literal["identical", "different", "missing", "extra", "record"]
BUILD_RECORDS = frozenset({"meta/build.log", "meta/ninja_log", "meta/CMakeCache.txt",
                           "meta/compile_commands.json", "meta/verify.json",
                           "meta/pytorch.json"})  # its defines/env name the build tree


@dataclass(frozen=True)
class FileDiff:
    path: str
    status: Status
    section: str | None = None  # ELF files that differ: the first differing section


def first_elf_difference(a: Path, b: Path) -> str | None:
    """The first section (in a's order) whose type, size or bytes differ from b's section of
    the same name; 'section table' / 'ELF header' otherwise; None when a or b is not ELF.
    The build-id note is a hash of the other sections, so it is named only when alone."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        with open(a, "rb") as fa, open(b, "rb") as fb:
            ea, eb = ELFFile(fa), ELFFile(fb)
            theirs = {s.name: s for s in eb.iter_sections()}
            found: list[str] = []
            for sa in ea.iter_sections():
                sb = theirs.get(sa.name)
                if sb is None or sa["sh_type"] != sb["sh_type"] or sa["sh_size"] != sb["sh_size"] \
                        or (sa["sh_type"] != "SHT_NOBITS" and sa.data() != sb.data()):
                    found.append(sa.name or "(unnamed section)")
                    if sa.name != BUILD_ID:
                        return sa.name or "(unnamed section)"
            if found:
                return found[0]
            if len(theirs) != ea.num_sections():
                return "section table"
            return "ELF header"  # same sections: the header, segments or padding differ
    except (ELFError, OSError, ValueError):
        return None


def compare(stored: list[FileEntry], new_dir: Path, stored_dir: Path | None = None) -> list[FileDiff]:
    """Every file of the stored manifest against the rebuilt directory (and its extras)."""
    new = {e.path: e for e in Manifest.scan_files(new_dir)}
    out: list[FileDiff] = []
    for e in stored:
        n = new.pop(e.path, None)
        if e.path in BUILD_RECORDS:
            out.append(FileDiff(e.path, "record"))
        elif n is None:
            out.append(FileDiff(e.path, "missing"))
        elif (e.kind, e.sha256, e.target, e.mode) == (n.kind, n.sha256, n.target, n.mode):
            out.append(FileDiff(e.path, "identical"))
        else:
            section = None
            if stored_dir is not None and e.kind == n.kind == "file":
                section = first_elf_difference(stored_dir / e.path, new_dir / e.path)
                if section is None and e.mode != n.mode and e.sha256 == n.sha256:
                    section = "mode"
            out.append(FileDiff(e.path, "different", section))
    out += [FileDiff(p, "record" if p in BUILD_RECORDS else "extra") for p in sorted(new)]
    return sorted(out, key=lambda d: d.path)


def differs(diffs: list[FileDiff]) -> list[FileDiff]:
    return [d for d in diffs if d.status in ("different", "missing", "extra")]


def render(diffs: list[FileDiff]) -> str:
    lines = []
    for d in diffs:
        extra = f" (first differing section: {d.section})" if d.section else ""
        lines.append(f"  {d.status:<9} {d.path}{extra}")
    return "\n".join(lines)


def summary(mode: str, name: str, diffs: list[FileDiff], kept: Path | None) -> dict:
    bad = differs(diffs)
    counts: dict[str, int] = {}
    for d in diffs:
        counts[d.status] = counts.get(d.status, 0) + 1
    return {"mode": mode, "artifact": name, "identical": not bad, "counts": counts,
            "files": [asdict(d) for d in diffs], "kept": str(kept) if kept else None}


def rebuild_and_compare(settings: Settings, store: Store, plan: Plan, artifact: Path,
                        toolchain: Toolchain) -> dict:
    """Build `plan` again (check=1 or rebuild=1, see the module docstring); the comparison."""
    check = settings.check
    mode = "check" if check else "rebuild"
    if check:  # what `doit verify toolchain=1` does: every pinned and toolchain file re-hashed
        verify_toolchain_full(store, plan.lock)
    stored = Store.read_manifest(artifact)
    kept: Path | None = None
    if check:
        with store.staging(f"check-{plan.name}") as work:
            stage = work / "out"
            stage.mkdir()
            console.print(f"check: building {plan.name} again in {work / 'build'} "
                          "(compile cache off)")
            run_builder(settings, store, plan, toolchain, work / "build", stage, "off")
            diffs = compare(stored.files, stage, artifact)
    else:
        build_dir = build_tree_of(store, plan, toolchain)
        with store.lock(f"build-{build_dir.name}"), store.staging(f"rebuild-{plan.name}") as stage:
            remove_tree(build_dir)
            console.print(f"rebuild: clean build of {plan.name} in {build_dir}")
            run_builder(settings, store, plan, toolchain, build_dir, stage, settings.compile_cache)
            diffs = compare(stored.files, stage, artifact)
            if differs(diffs):
                kept = store.tmp_dir / f"rebuilt-{plan.name}"
                remove_tree(kept)
                os.rename(stage, kept)
    bad = differs(diffs)
    verdict = "identical to the store" if not bad else f"{len(bad)} file(s) differ from the store"
    console.print(f"{mode} {plan.name}: {verdict}\n{render(diffs)}", markup=False)
    if kept is not None:
        console.print(f"the rebuilt output is kept in {kept}", markup=False)
    result = summary(mode, plan.name, diffs, kept)
    if bad:  # both exit 1: the store entry is not what its inputs build now
        first = bad[0]
        cause = f" ({first.section})" if first.section else ""
        what = "not reproducible" if check else "differs from the store"
        raise CheckFailed(f"{mode} {plan.name}: {what}: {len(bad)} file(s) differ, "
                          f"first {first.path}{cause}")
    return result
