"""Run a recipe's builder once: the one place a builder is run (build, rebuild=1, check=1).

The build gets the toolchain's environment, the compile cache's (with its stats line after
the build, and its server stopped whatever happens), the variant's env and MAX_JOBS. After
it, staged files the build tree's last commit staged alike become their pool inodes
(`Store.reuse_unchanged`): an incremental build's commit and verify then read only what
changed. check=1 and rebuild=1 build in a new or wiped tree, which has no record to reuse.
"""
from __future__ import annotations

from pathlib import Path

from orchestrator.builders.cmake_steps import CONFIGURE_STAMP
from orchestrator.builders.compile_cache import launcher
from orchestrator.builders.context import BuildContext
from orchestrator.builders.install_map import install_sources
from orchestrator.builders.registry import get_builder
from orchestrator.hashing import digest_of
from orchestrator.plan import Plan
from orchestrator.settings import Settings
from orchestrator.store import Store
from orchestrator.toolchain import Toolchain


def run_builder(settings: Settings, store: Store, plan: Plan, toolchain: Toolchain,
                build_dir: Path, stage: Path, compile_cache: str) -> BuildContext:
    """Run the recipe's builder: build_dir → stage/prefix + stage/meta; the context used."""
    (stage / "meta").mkdir()
    cc = launcher.for_build(settings, compile_cache, toolchain.deb_root, store.root / "ccache",
                            toolchain.venv)
    env = {**toolchain.build_env(),
           **cc.env(store.root, launcher.begin_stats(build_dir), plan.source_dir),
           **plan.variant.env, "MAX_JOBS": str(settings.jobs)}
    ctx = BuildContext(plan=plan, toolchain=toolchain, source_dir=plan.source_dir,
                       build_dir=build_dir, stage=stage, env=env, jobs=settings.jobs,
                       log=stage / "meta" / "build.log", compile_cache=cc,
                       keep_going=settings.keep_going)
    launcher.begin_build(cc, env)
    try:
        used = get_builder(plan.recipe.build.system).build(ctx) or ctx  # e.g. a source copy
        launcher.report_build(cc, build_dir)  # the summary's hits/misses line
    finally:
        launcher.end_build(cc)  # sccache: its server stops with the build
    reuse_installed(store, stage, build_dir, used.copies)
    return used


def reuse_installed(store: Store, stage: Path, build_dir: Path,
                    copies: dict[str, Path]) -> None:
    """Staged copies of unchanged build-tree or source files get their committed inodes
    (Store.reuse_unchanged): what the install copied (the install scripts say which file
    each is) and what the builder copied into meta/ (`copies`). Only for trees CMake
    configured and installed: the configure stamp (the digest of cmake's arguments) and
    the install scripts are the epoch."""
    try:
        stamp = (build_dir / CONFIGURE_STAMP).read_text()
    except OSError:
        return  # setuptools, pep517: their outputs are hashed
    scripts, installed = install_sources(build_dir)
    if not scripts:
        return

    def source_of(rel: str) -> Path | None:
        if rel.startswith("prefix/"):
            return installed.source_of(rel[len("prefix/"):])
        return copies.get(rel)

    store.reuse_unchanged(stage, build_dir, digest_of([stamp, scripts]), source_of)
