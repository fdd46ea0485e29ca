"""What every builder gets (BuildContext), what it is (Builder), and where its build tree is
kept (build_dir_key)."""
from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from orchestrator.builders.compile_cache.kind import OFF, CompileCache
from orchestrator.model.logical_paths import DWO_DIR, logical_build, logical_source
from orchestrator.plan.derivation import Plan
from orchestrator.store.artifacts import Store
from orchestrator.toolchain.materialize import Toolchain


@dataclass
class BuildContext:
    plan: Plan
    toolchain: Toolchain
    source_dir: Path
    build_dir: Path          # persistent, per recipe+variant+checkout: incremental rebuilds
    stage: Path              # artifact staging dir: write stage/prefix and stage/meta
    env: dict[str, str]
    jobs: int
    log: Path
    compile_cache: CompileCache = field(default=OFF)
    keep_going: bool = False  # ninja -k 0: report every failing object, not only the first
    # Staged path ("meta/...") -> the build-tree or source file it is a plain copy of
    # (shutil.copy2): build_step gives it the committed inode when that file is unchanged.
    copies: dict[str, Path] = field(default_factory=dict)
    # (staged path, source) -> the pool inode the build tree's last commit gave that very
    # copy, when the source is as it was then (Store.pooled_copy); None: copy it.
    pooled_copy: Callable[[str, Path], Path | None] | None = None

    def keep_copy(self, source: Path, rel: str) -> None:
        """stage/rel becomes a plain copy of `source` (shutil.copy2), noted in `copies`. An
        unchanged one is linked from the pool instead: PyTorch's generated sources are 32 MB
        copied again by every incremental build otherwise. Nothing may write into a kept
        copy afterwards (it may be a committed inode): replace it instead."""
        dest = self.stage / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.unlink(missing_ok=True)  # never copied through: it may be a committed inode
        self.copies[rel] = source
        pooled = self.pooled_copy(rel, source) if self.pooled_copy else None
        if pooled is not None:
            try:
                os.link(pooled, dest)
                return
            except OSError:  # too many links, another device: copied as before
                pass
        shutil.copy2(source, dest)

    @property
    def prefix(self) -> Path:
        return self.stage / "prefix"

    @property
    def meta(self) -> Path:
        return self.stage / "meta"

    @property
    def logical_source(self) -> str:
        """Where debug info names the source: `/orch/src/<recipe>`, also for a per-build copy
        inside the build tree (a pinned PyTorch tree's `source/`): its objects then agree
        byte for byte with a checkout's, and the compile cache may hand one the other's."""
        return logical_source(self.plan.recipe.name)

    @property
    def logical_build(self) -> str:
        return logical_build(self.plan.recipe.name, self.plan.variant_name)

    def prefix_map_flags(self) -> list[str]:
        """Debug info and __FILE__ name logical roots, not this machine's paths. GCC applies
        the last matching map: a source copy inside the build tree is mapped again after the
        build tree, absolute and as ccache's base_dir rewrite passes it (relative to the
        build tree), so it is named `/orch/src/<recipe>/...` as a checkout is."""
        flags = [f"-ffile-prefix-map={self.source_dir}={self.logical_source}",
                 f"-ffile-prefix-map={self.build_dir}={self.logical_build}"]
        if self.plan.variant.split_dwarf:
            # The unit's comp_dir (the build tree itself) becomes DWO_DIR, where lldb finds
            # its .dwo beside the installed library; paths inside the build tree keep their
            # logical name, those ccache made relative to it too (the first map: an empty
            # prefix matches them), and other absolute paths stay as they are ("/=/").
            flags = [f"-ffile-prefix-map=={self.logical_build}/", "-ffile-prefix-map=/=/",
                     flags[0], f"-fdebug-prefix-map={self.build_dir}={DWO_DIR}",
                     f"-ffile-prefix-map={self.build_dir}/={self.logical_build}/"]
        if self.source_dir.is_relative_to(self.build_dir) and self.source_dir != self.build_dir:
            flags += [f"-ffile-prefix-map={self.source_dir}={self.logical_source}",
                      f"-ffile-prefix-map={self.source_dir.relative_to(self.build_dir).as_posix()}"
                      f"={self.logical_source}"]
        return flags

    def split_dwarf_flags(self) -> list[str]:
        """-gsplit-dwarf where the variant asks for it (builders/split_dwarf.py). GCC 12 adds
        GNU pubnames to split units whatever -gno-pubnames says (two thirds of libc10.so's
        linked debug info; lldb-14 does not read them)."""
        return ["-gsplit-dwarf"] if self.plan.variant.split_dwarf else []

    def prefix_map(self) -> dict[str, str]:
        return {self.logical_source: "source", self.logical_build: "build"}


class Builder(Protocol):
    def build(self, ctx: BuildContext) -> BuildContext | None:
        """Build into ctx.prefix/ctx.meta; return the context actually used when it differs
        (a builder that builds from a copy of the source), so the manifest names its paths."""
        ...


def build_dir_key(plan: Plan, toolchain: Toolchain) -> str:
    """One build tree per recipe, variant, checkout location and toolchain: CMakeCache pins
    the source and the compilers, so a changed toolchain gets a fresh tree."""
    # A checkout's patched copy (a new store path per edit) keys by the checkout itself
    # (and the overlays/patches applied to it).
    src = plan.source.extra.get("build_key") or plan.source_dir
    where = hashlib.sha256(f"{src}\0{toolchain.root}".encode()).hexdigest()[:8]
    return f"{plan.recipe.name}-{plan.variant_name}-{where}"


def build_tree_of(store: Store, plan: Plan, toolchain: Toolchain) -> Path:
    """The one build tree of this plan with this toolchain: <store>/build/<build_dir_key>."""
    return store.build_dir / build_dir_key(plan, toolchain)
