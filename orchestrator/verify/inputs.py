"""Everything a verification run needs to know, independent of plans and toolchains."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from orchestrator.verify.resolve import SearchConfig

if TYPE_CHECKING:  # the recipe's pydantic model; the engine reads only its attributes
    from orchestrator.model.verify_rules import VerifyRules

# The platform: always acceptable from the system (recorded in the lock's platform facts).
BASE_SYSTEM_LIBS = ("libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
                    "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "libutil.so.1",
                    "libresolv.so.2", "libstdc++.so.6", "libgcc_s.so.1", "libmvec.so.1")


@dataclass(frozen=True)
class DefaultRules:
    """The [verify] rules of a recipe that gives none: `model.verify_rules.VerifyRules()`'s
    values (tests/test_verify_cache.py holds them equal), without importing pydantic into a
    process that only verifies."""
    allowed_system_libs: tuple[str, ...] = ()
    required_symbols: dict[str, list[str]] = field(default_factory=dict)
    host: str = "none"
    libpython: str = "forbid"
    max_versions: dict[str, str] = field(default_factory=dict)
    own_libs: tuple[str, ...] = ("**/*.so", "**/*.so.*", "bin/*")
    release_debug_allowed: tuple[str, ...] = ()
    opt_level: dict[str, str] = field(default_factory=dict)
    cmake_cache: dict[str, str] = field(default_factory=dict)
    cuda_architectures: dict[str, str] = field(default_factory=dict)
    skip: tuple[str, ...] = ()
    ignore: tuple[Any, ...] = ()  # model.verify_rules.IgnoreRule: .path, .reason


Rules = Union["VerifyRules", DefaultRules]


def rules_data(rules: Rules) -> dict[str, Any]:
    """The rules as JSON data (lists, dicts), whichever form they come in."""
    if isinstance(rules, DefaultRules):
        return {k: list(v) if isinstance(v, tuple) else dict(v) if isinstance(v, dict) else v
                for k, v in vars(rules).items() if k != "ignore"}
    return rules.model_dump(mode="json", exclude={"ignore"})  # applied after the checks


@dataclass
class Interpreter:
    """The locked Python: its binary (preloaded for extension modules) and ABI facts."""
    path: Path
    version: str
    ext_suffix: str
    libpython_soname: str | None


@dataclass
class TorchFacts:
    """The locked torch wheel: its version, lib/ directory and C++ ABI flag."""
    version: str
    lib_dir: Path | None
    cxx11_abi: bool


@dataclass
class VerifyConfig:
    """Inputs of one verification run (built from a plan + toolchain, or by hand)."""
    artifact: str
    root: Path  # the artifact directory (holds prefix/ and meta/), or any tree to check
    prefix: Path
    rules: Rules = field(default_factory=DefaultRules)
    variant: str = "relwithdebinfo"
    build_type: str | None = None  # CMAKE_BUILD_TYPE; None: no debug-info expectations
    cmake: bool = False  # meta/CMakeCache.txt must exist and match
    defines: dict[str, object] = field(default_factory=dict)
    search: SearchConfig = field(default_factory=SearchConfig)
    toolchain_dirs: list[Path] = field(default_factory=list)
    build_dirs: list[Path] = field(default_factory=list)
    python_dirs: list[Path] = field(default_factory=list)
    interpreter: Interpreter | None = None
    torch: TorchFacts | None = None
    # The toolchain's unpacked debs holding the pinned lldb-14: debuggable variants are read
    # with it (checks/debug_info); None: no lldb pinned, that part is not run.
    lldb_deb_root: Path | None = None
    preload: list[Path] = field(default_factory=list)  # loaded before every root (the host)
    roots: list[Path] | None = None  # check only these files (default: every ELF in prefix)
    # Relocatable objects whose .nv_fatbin the cuda check reads too (a targets= build's CUDA
    # objects, kept in meta/objects: builders/pytorch_install.keep_cuda_objects).
    cuda_objects: list[Path] = field(default_factory=list)
    # The verdict cache (verify/cache.py), e.g. <store>/cache/verify; None: no reuse.
    cache_dir: Path | None = None
    hashes: dict[str, str] = field(default_factory=dict)  # root-relative path -> sha256, trusted
    hash_members: bool = False  # hash tree files the cache key needs (a stage: commit will)
