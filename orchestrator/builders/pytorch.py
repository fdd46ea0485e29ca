"""PyTorch: drive its CMake build the way its setup.py would, one build tree per variant.

PyTorch's own driver (setup.py; from 2.14 scikit-build-core, whose [tool.scikit-build]
table we read: sources/skbuild_settings.py) hard-codes
`build/`, skips configure once build/CMakeCache.txt exists and installs into <src>/torch,
so two variants of one checkout would share a CMakeCache. We run CMake ourselves instead,
with the defines that driver derives from the environment (CMAKE_BUILD_TYPE wins over
DEBUG / REL_WITH_DEB_INFO; BUILD_*, USE_*, CMAKE_* become -D), into the per-variant build
tree the store gives us, and install into the artifact. torch._C is compiled from
torch/csrc/stub.c against libtorch_python as setup.py does.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from orchestrator.builders.cmake_steps import collect_meta, compile_, configure, install
from orchestrator.builders.context import BuildContext
from orchestrator.builders.cxx_standard import check_standard
from orchestrator.builders.pytorch_defines import (
    build_env,
    check_cuda_arch_list,
    frontend_of,
    options_of,
    python_facts,
    pytorch_defines,
)
from orchestrator.builders.pytorch_install import (
    build_extensions,
    copy_companion_packages,
    copy_python_package,
    install_targets,
    keep_cuda_objects,
    target_dirs,
)
from orchestrator.builders.pytorch_meta import (
    cache_value,
    checkout_links,
    collect_generated,
    cxx11_abi,
    link_compile_commands_into_meta,
)
from orchestrator.builders.pytorch_source import SOURCE_COPY, build_copy_of_source, builds_in_place, source_lock
from orchestrator.hashing import pretty_json
from orchestrator.memo import head_start
from orchestrator.sources.tree_version import detect_driver


class PyTorchBuilder:
    def build(self, ctx: BuildContext) -> BuildContext:
        # The tree's front-end and the C++ standard it asks for are read from the source as
        # given, before anything is copied, configured or compiled: a tree we cannot drive,
        # or a compiler too old for it, is one line and nothing changed.
        opts = options_of(ctx)
        driver = detect_driver(ctx.source_dir)
        env = build_env(ctx, opts)
        check_cuda_arch_list(ctx, env)
        frontend = frontend_of(ctx, driver, env)
        subdir = frontend.source_subdir if frontend else "."
        standard = check_standard(ctx.toolchain.cxx, ctx.source_dir / subdir / "CMakeLists.txt",
                                  f"recipes/{ctx.plan.recipe.name}.toml", ctx.build_dir)
        ctx = build_copy_of_source(ctx)
        py = python_facts(ctx.toolchain.python, ctx.build_dir)
        # A checkout is configured through <build tree>/source, a link named as a pinned
        # tree's copy: its compile lines are the same for every checkout path and as the
        # pinned tree's, and both map `source` to /orch/src/<recipe>, so the compile cache
        # hits across them with the right debug paths (docs/compile-cache.md).
        linked = builds_in_place(ctx)
        defines = pytorch_defines(ctx, opts, env, frontend, py, linked_source=linked)
        abi = cxx11_abi(ctx, defines, env)  # before ninja: a head start's ninja runs meanwhile
        ctx.build_dir.mkdir(parents=True, exist_ok=True)
        targets = ctx.plan.variant.targets
        extensions: list[str] = []
        lock = source_lock(ctx)
        with head_start.reentrant_lock(lock):
            configured = configure(ctx, env, defines, file_api=True, linked_source=linked,
                                   link_name=SOURCE_COPY, source_subdir=subdir,
                                   extra_args=frontend.args if frontend else [])
            # Unknown target names: exit 2 before anything compiles. Not while a head start's
            # ninja runs in the tree (a regeneration it runs rewrites the file-API reply): it
            # runs only for a command whose same targets= built before, and is read after.
            ahead = head_start.running_in(ctx.build_dir)
            dirs = target_dirs(ctx.build_dir, targets) if targets and not ahead else []
            # A checkout's next edit may start this ninja ahead of the planner (a pinned
            # tree's copy is made again for a new identity: its ninja is never started early).
            compile_(ctx, env, may_head_start=linked, locks=(Path(lock.lock_file),))
            if targets and ahead:
                dirs = target_dirs(ctx.build_dir, targets)
            ctx.prefix.mkdir(parents=True, exist_ok=True)
            # meta/'s generated sources (tens of MB) are copied while the install runs: the
            # two read the finished tree and write apart (meta/, prefix/).
            with ThreadPoolExecutor(1, thread_name_prefix="meta") as pool:
                copying = pool.submit(collect_generated, ctx)
                if targets:
                    install_targets(ctx, env, dirs)
                    keep_cuda_objects(ctx, targets)
                else:
                    install(ctx, env)
                    if opts.python_extension:
                        extensions = build_extensions(ctx, env, py, defines["CMAKE_BUILD_TYPE"])
                        copy_python_package(ctx)
                        extensions += copy_companion_packages(ctx, py)
                collect_meta(ctx)
                link_compile_commands_into_meta(ctx)
                generated = copying.result()
        cache = ctx.build_dir / "CMakeCache.txt"
        info = {
            "driver": driver,
            "frontend": None if frontend is None else {
                "source_dir": subdir, "args": frontend.args, "defines": frontend.defines,
                "table_build_type": frontend.table_build_type, "overrides": frontend.matched,
                "minimum_version": frontend.minimum_version},
            "cxx_standard": standard,
            "configured_now": configured,
            "build_type": cache_value(cache, "CMAKE_BUILD_TYPE"),
            "glibcxx_use_cxx11_abi": abi,
            "torch_version": defines["TORCH_BUILD_VERSION"],
            "targets": targets,
            "defines": defines,
            "env": {k: v for k, v in sorted(env.items()) if k not in ("PATH", "HOME", "TERM")},
            "prefix_map": ctx.prefix_map(),
            "extensions": extensions,
            "generated": generated,
        }
        (ctx.meta / "pytorch.json").write_text(pretty_json(info))
        (ctx.meta / "workspace-links.json").write_text(pretty_json({"links": checkout_links(ctx)}))
        return ctx

