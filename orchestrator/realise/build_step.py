"""Run a recipe's builder once: the one place a builder is run (build, rebuild=1, check=1).

The build gets the toolchain's environment, the compile cache's (with its stats line after
the build, and its server stopped whatever happens), the variant's env and MAX_JOBS. After
it, staged files the build tree's last commit staged alike become their pool inodes
(`Store.reuse_unchanged`): an incremental build's commit and verify then read only what
changed. A builder's own copies into meta/ are linked from the pool while it builds
(`BuildContext.keep_copy`), so an unchanged one is not even copied; the record is read once
for both (`CommittedCopies`). check=1 and rebuild=1 build in a new or wiped tree, which has
no record to reuse.
"""
from __future__ import annotations

import threading
from pathlib import Path

from orchestrator.builders import bytecode, split_dwarf
from orchestrator.builders.cmake_steps import CONFIGURE_STAMP
from orchestrator.builders.compile_cache import launcher
from orchestrator.builders.compile_cache.wrappers import build_path
from orchestrator.builders.context import BuildContext
from orchestrator.builders.install_map import InstallMap, install_sources
from orchestrator.builders.registry import get_builder
from orchestrator.builders.runtime_site import install_runtime
from orchestrator.config.settings import Settings
from orchestrator.console import console
from orchestrator.hashing import digest_of
from orchestrator.model.logical_paths import logical_build, logical_source
from orchestrator.plan.derivation import Plan
from orchestrator.store.artifacts import Store
from orchestrator.store.stage_record import read_record
from orchestrator.toolchain.materialize import Toolchain


def run_builder(settings: Settings, store: Store, plan: Plan, toolchain: Toolchain,
                build_dir: Path, stage: Path, compile_cache: str) -> BuildContext:
    """Run the recipe's builder: build_dir → stage/prefix + stage/meta; the context used."""
    (stage / "meta").mkdir()
    committed = CommittedCopies(store, build_dir)
    cc = launcher.for_build(settings, compile_cache, toolchain.deb_root, store.paths.ccache,
                            toolchain.venv)
    env = {**toolchain.build_env(),
           **cc.env(store.root, launcher.begin_stats(build_dir), plan.source_dir,
                    (logical_source(plan.recipe.name), logical_build(plan.recipe.name, plan.variant_name))),
           **plan.variant.env, "MAX_JOBS": str(settings.jobs)}
    env["PATH"] = build_path(env["PATH"], toolchain.venv / "bin", cc, build_dir)  # no stray launcher
    ctx = BuildContext(plan=plan, toolchain=toolchain, source_dir=plan.source_dir,
                       build_dir=build_dir, stage=stage, env=env, jobs=settings.jobs,
                       log=stage / "meta" / "build.log", compile_cache=cc,
                       keep_going=settings.keep_going,
                       pooled_copy=committed.pooled)
    launcher.begin_build(cc, env)
    try:
        used = get_builder(plan.recipe.build.system).build(ctx) or ctx  # e.g. a source copy
        launcher.report_build(cc, build_dir)  # the summary's hits/misses line
    finally:
        launcher.end_build(cc)  # sccache: its server stops with the build
    if plan.variant.split_dwarf:
        placed = split_dwarf.place_dwo_files(used)
        console.print(f"[dim]split DWARF: {placed} .dwo file(s) beside their libraries[/]")
    install_runtime(store, toolchain, plan.runtime, stage)  # [runtime] requires, pinned
    compiled = bytecode.compile_packages(stage / "prefix", plan.recipe.outputs.python,
                                         toolchain.python, build_dir / bytecode.CACHE, settings.jobs)
    if compiled["compiled"] or compiled["failed"]:
        console.print(f"[dim]bytecode: {compiled['compiled']} module(s) compiled, "
                      f"{compiled['cached']} from the build tree's cache, {compiled['failed']} "
                      "not compilable (imported from source)[/]")
    reuse_installed(store, stage, committed, used.copies)
    return used


def epoch_of(build_dir: Path) -> tuple[str, InstallMap] | None:
    """What the stage record's copies depend on besides their sources: the configure stamp
    (the digest of cmake's arguments) and the install scripts; None for trees CMake did not
    configure and install (setuptools, pep517: their outputs are hashed)."""
    try:
        stamp = (build_dir / CONFIGURE_STAMP).read_text()
    except OSError:
        return None
    scripts, installed = install_sources(build_dir)
    return (digest_of([stamp, scripts]), installed) if scripts else None


class CommittedCopies:
    """The build tree's last stage record, read once per epoch: a builder's kept copies take
    the epoch of their first one (after configure, so this build's; the PyTorch builder keeps
    copies from two threads), and reuse_installed, which makes the epoch again after the
    install, reads the record again only if the epoch differs."""

    def __init__(self, store: Store, build_dir: Path) -> None:
        self.store, self.build_dir = store, build_dir
        self._lock = threading.Lock()
        self._read: tuple[str | None, dict[str, list]] | None = None  # (epoch, its files)

    def files(self, epoch: str | None) -> dict[str, list]:
        """The record's files under `epoch` ({} for None: no CMake install)."""
        with self._lock:
            if self._read is None or self._read[0] != epoch:
                files = read_record(self.store.root, self.build_dir, epoch) if epoch else {}
                self._read = (epoch, files)
            return self._read[1]

    def pooled(self, rel: str, source: Path) -> Path | None:
        """BuildContext.pooled_copy."""
        read = self._read
        if read is None:  # the first kept copy: this build's epoch
            epoch = epoch_of(self.build_dir)
            files = self.files(epoch[0] if epoch else None)
        else:
            files = read[1]
        return self.store.pooled_copy(files, rel, source)


def reuse_installed(store: Store, stage: Path, committed: CommittedCopies,
                    copies: dict[str, Path]) -> None:
    """Staged copies of unchanged build-tree or source files get their committed inodes
    (Store.reuse_unchanged): what the install copied (the install scripts say which file
    each is) and what the builder copied into meta/ (`copies`)."""
    epoch = epoch_of(committed.build_dir)
    if epoch is None:
        return
    digest, installed = epoch

    def source_of(rel: str) -> Path | None:
        if rel.startswith("prefix/"):  # installed, or the builder's copy (a .dwo file)
            return installed.source_of(rel[len("prefix/"):]) or copies.get(rel)
        return copies.get(rel)

    store.reuse_unchanged(stage, committed.build_dir, digest, source_of,
                          committed.files(digest))
