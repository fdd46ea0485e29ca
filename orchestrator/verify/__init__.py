"""ABI and linkage verification of artifacts: read ELF files (never run them), report findings.

`verify_artifact(staged, plan, toolchain)` is what realise calls before commit; `verify_tree`
(engine) is the plan-free core the benchmark and tests use.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.verify.engine import verify_tree
from orchestrator.verify.inputs import Interpreter, VerifyConfig
from orchestrator.verify.report import VerifyReport
from orchestrator.verify.resolve import SearchConfig, realpath, within

if TYPE_CHECKING:
    from orchestrator.plan.derivation import Plan
    from orchestrator.toolchain.materialize import Toolchain

__all__ = ["verify_artifact", "verify_tree", "config_for", "VerifyReport", "VerifyConfig"]


def config_for(artifact_dir: Path, plan: Plan, toolchain: Toolchain,
               hashes: dict[str, str] | None = None) -> VerifyConfig:
    """The verification inputs of a staged or committed artifact of `plan`. Verdicts are
    reused from `<store>/cache/verify` (verify/cache.py); `hashes` (path -> sha256) may name
    the files' content when a caller checks it anyway (doit verify's store-entry check)."""
    from orchestrator.verify.torch_abi import torch_facts

    recipe = plan.recipe
    prefix = artifact_dir / "prefix"
    py = toolchain.python_entry
    interpreter = Interpreter(path=Path(py.path), version=py.version, ext_suffix=py.ext_suffix,
                              libpython_soname=py.libpython_soname)
    uses_torch = "pypi:torch" in plan.inputs
    torch = torch_facts(toolchain) if uses_torch else None
    store_root = toolchain.root.parent.parent
    build_dirs = [store_root / "build", Path(plan.source_dir)]
    preload: list[Path] = []
    if recipe.verify.host in ("python", "torch"):
        preload.append(interpreter.path)
    if recipe.verify.host == "torch":
        if torch is None or torch.lib_dir is None:
            from orchestrator.errors import UserError
            raise UserError(f"recipes/{recipe.name}.toml: verify.host = \"torch\" needs pypi:torch "
                            "in build.uses")
        preload += sorted(torch.lib_dir.parent.glob("_C.cpython-*.so"))
    defines: dict[str, object] = dict(plan.variant.defines)
    opts = recipe.build.pytorch
    if opts is not None and opts.cuda and opts.cuda_arch_list:  # the cuda check's expectation
        defines.setdefault("TORCH_CUDA_ARCH_LIST", plan.variant.env.get("TORCH_CUDA_ARCH_LIST",
                                                                        opts.cuda_arch_list))
    objects = artifact_dir / "meta" / "objects"
    return VerifyConfig(
        artifact=plan.name,
        root=artifact_dir,
        prefix=prefix,
        rules=recipe.verify,
        variant=plan.variant_name,
        build_type=plan.variant.build_type,
        # cmake builds must leave meta/CMakeCache.txt; other builders are checked when they do.
        cmake=(recipe.build.system == "cmake" and not plan.variant.targets)
        or (artifact_dir / "meta" / "CMakeCache.txt").is_file(),
        defines=defines,
        # No LD_LIBRARY_PATH: .orch/env.sh sets none (it would mix artifacts); every library
        # must be found through RUNPATH/RPATH, as a process without env.sh finds it.
        search=SearchConfig(),
        toolchain_dirs=[toolchain.root],
        build_dirs=build_dirs,
        python_dirs=[prefix / d for d in recipe.outputs.python],
        interpreter=interpreter,
        torch=torch,
        lldb_deb_root=toolchain.deb_root if toolchain.debugger is not None else None,
        preload=preload,
        cuda_objects=sorted(objects.rglob("*.o")) if objects.is_dir() else [],
        cache_dir=store_root / "cache" / "verify",
        hashes=dict(hashes or {}),
        # a stage's files are hashed by its commit anyway (hashing.remember_sha256)
        hash_members=within(realpath(str(artifact_dir)), realpath(str(store_root / "tmp"))),
    )


def verify_artifact(staged_dir: Path, plan: Plan, toolchain: Toolchain,
                    hashes: dict[str, str] | None = None) -> VerifyReport:
    """Verify a staged artifact directory (prefix/ + meta/) against its plan and toolchain."""
    return verify_tree(config_for(staged_dir, plan, toolchain, hashes))
