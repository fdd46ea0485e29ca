"""spec_for: the IdeSpec of a workspace's active profile (or of a given plan), with the
builder's configure arguments per variant and `.orch/toolchain` pointing at the toolchain."""
from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from pathlib import Path

from orchestrator.builders.cmake_steps import configure_args
from orchestrator.builders.context import BuildContext
from orchestrator.config.settings import Settings
from orchestrator.errors import UserError
from orchestrator.fs import atomic_symlink
from orchestrator.ide.spec import IdeSpec, presets_binary_dir_for
from orchestrator.model.recipe import path_outputs, resolve_variant
from orchestrator.plan.derivation import Plan, make_plan
from orchestrator.plan.selection import extra_vars, manifest_selection
from orchestrator.store.artifacts import Store
from orchestrator.toolchain import cuda_toolkit
from orchestrator.toolchain.materialize import Toolchain, ensure_toolchain
from orchestrator.workspace.profiles import Workspace


def spec_for(settings: Settings, plan: Plan | None = None,
             toolchain: Toolchain | None = None) -> tuple[IdeSpec, Path | None]:
    """The IdeSpec for a workspace (default: its active profile's recipe and variant), and the
    active artifact. Materializes the toolchain (the debugger lives there) unless the caller
    has it already (`toolchain`, of `plan`'s lock), and points `.orch/toolchain` at it."""
    store = Store(settings.store_root)
    ws = Workspace(settings.workspace)
    active = ws.current()
    manifest = store.read_manifest(active) if active is not None and active.is_dir() else None
    if plan is None:
        recipe = variant = None
        if manifest is not None:
            recipe = manifest.recipe if "recipe" not in settings.vars else None
            variant = manifest.variant if "variant" not in settings.vars else None
            settings = dataclasses.replace(settings, vars={
                **manifest_selection(manifest, settings.workspace), **settings.vars})
        plan = make_plan(settings, store, recipe, variant)
    select_vars = extra_vars(plan)
    source_logical = next((k for k, role in (manifest.prefix_map if manifest else {}).items()
                           if role == "source"), None)
    tc = toolchain if toolchain is not None else ensure_toolchain(store, plan.lock)
    if not ws.toolchain_link.is_symlink() or Path(os.readlink(ws.toolchain_link)) != tc.root:
        ws.orch.mkdir(parents=True, exist_ok=True)
        atomic_symlink(tc.root, ws.toolchain_link)
    args: dict[str, list[str]] = {}
    if plan.recipe.build.system == "cmake":
        for v in plan.recipe.variants:
            vplan = dataclasses.replace(plan, variant_name=v, variant=resolve_variant(
                plan.recipe, v, where=f"recipes/{plan.recipe.name}.toml"))
            ctx = BuildContext(plan=vplan, toolchain=tc, source_dir=plan.source_dir,
                               build_dir=presets_binary_dir_for(ws.root, plan.recipe.name, v),
                               stage=ws.orch / "unused", env={}, jobs=settings.jobs,
                               log=ws.orch / "unused.log")
            args[v] = configure_args(ctx)
    deb_root = tc.deb_root if tc.debugger is not None else None
    cuda = cuda_toolkit.toolkit_entry(plan.lock)
    cuda_gdb = cuda_gdb_for(settings, tc, plan.recipe.name, plan.lock.name,
                            cuda.version if cuda else None)
    spec = IdeSpec(
        workspace=ws.root, repo_root=settings.repo_root, recipe=plan.recipe.name,
        variant=plan.variant_name, variants=list(plan.recipe.variants),
        source_dir=plan.source_dir, toolchain_root=tc.root, toolchain_python=tc.python,
        deb_root=deb_root, cmake=tc.cmake, ninja=tc.ninja, cc=tc.cc, cxx=tc.cxx,
        outputs=path_outputs(plan.recipe), configure_args=args,
        doit=[sys.executable, "-m", "doit", "-f", str(settings.repo_root / "dodo.py")],
        gdb=Path(g) if (g := shutil.which("gdb")) else None,
        source_logical=source_logical, select_vars=select_vars,
        checkout_dir=Path(c) if (c := plan.source.extra.get("checkout_dir")) else None,
        cuda_gdb=cuda_gdb, cuda_version=cuda.version if cuda else None)
    return spec, active


def cuda_gdb_for(settings: Settings, tc: Toolchain, recipe: str, lock: str,
                 cuda_version: str | None) -> Path | None:
    """The toolchain's cuda-gdb unless `cuda_gdb=0`; `cuda_gdb=1` where the toolchain has
    none: one line (only CUDA 12.4's is pinned: no registry here carries a cuda-gdb for 13)."""
    wanted = settings.flag("cuda_gdb", True)
    if wanted and tc.cuda_gdb is None and "cuda_gdb" in settings.vars:
        has = f"CUDA {cuda_version}, no cuda-gdb" if cuda_version else "no CUDA toolkit"
        raise UserError(f"cuda_gdb=1: the toolchain of recipe {recipe} (lock {lock}) has {has}; "
                        "cuda-gdb 12.4 is pinned in locks/cuda12.toml ([cuda.gdb]) only, e.g. "
                        "recipe=cudademo12 (no registry here carries a cuda-gdb for CUDA 13)")
    return tc.cuda_gdb if wanted else None
