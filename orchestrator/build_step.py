"""Run a recipe's builder once: the one place a builder is run (build, rebuild=1, check=1).

The build gets the toolchain's environment, the compile cache's (with its stats line after
the build, and its server stopped whatever happens), the variant's env and MAX_JOBS.
"""
from __future__ import annotations

from pathlib import Path

from orchestrator.builders.compile_cache import launcher
from orchestrator.builders.context import BuildContext
from orchestrator.builders.registry import get_builder
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
    return used
