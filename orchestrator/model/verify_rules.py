"""A recipe's verification rules (`[verify]` in the recipe TOML)."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

VERSION_RE = r"^\d+(\.\d+)*$"


class IgnoreRule(BaseModel):
    """A file of the prefix whose findings are not the recipe's to fix, with why."""
    model_config = ConfigDict(extra="forbid")
    # A glob relative to the prefix (fnmatch: `*` also crosses `/`), e.g. "python/foo/lib/*".
    path: str = Field(min_length=1, max_length=300)
    # Why: shown in every report next to the findings it set aside.
    reason: str = Field(min_length=1, max_length=300)


class VerifyRules(BaseModel):
    """What `doit verify` checks beyond the defaults (see docs/verify.md)."""
    model_config = ConfigDict(extra="forbid")
    # Sonames (or glob patterns) that may resolve to system library directories; glibc,
    # libstdc++ and libgcc_s (the platform) are always allowed.
    allowed_system_libs: list[str] = []
    # Library path (relative to prefix) -> demangled symbol patterns it must export.
    required_symbols: dict[str, list[str]] = {}
    # What loads the artifact: "none" (resolved on its own; extension modules still get the
    # interpreter), "python" (the locked interpreter first) or "torch" (the interpreter and the
    # locked torch's _C with its libraries, as after `import torch`).
    host: Literal["none", "python", "torch"] = "none"
    # Extension modules: "forbid" any libpython; "interpreter" allows exactly the locked
    # interpreter's libpython soname.
    libpython: Literal["forbid", "interpreter"] = "forbid"
    # Highest symbol version the artifact may need, e.g. {"GLIBC": "2.28", "GLIBCXX": "3.4.30"}.
    max_versions: dict[Literal["GLIBC", "GLIBCXX", "CXXABI"], str] = {}
    # Globs (relative to prefix) of the project's own libraries whose debug info is checked.
    own_libs: list[str] = ["**/*.so", "**/*.so.*", "bin/*"]
    # Globs (relative to prefix) allowed to carry debug info in release variants.
    release_debug_allowed: list[str] = []
    # Variant -> expected -O level in DW_AT_producer ("0", "1", "2", "3", "s", "g", "fast").
    opt_level: dict[str, str] = {}
    # Extra meta/CMakeCache.txt entries every variant must have, e.g. {"BUILD_SHARED_LIBS": "ON"}.
    cmake_cache: dict[str, str] = {}
    # Variant -> CUDA architectures in CMake syntax ("80", "90-real", "90-virtual"); when absent
    # the variant's CMAKE_CUDA_ARCHITECTURES define is used.
    cuda_architectures: dict[str, str] = {}
    # Checks not to run for this recipe (the report records them as skipped).
    skip: list[Literal["resolution", "symbols", "cxx_abi", "python", "debug_info",
                       "portability", "required_symbols", "cuda"]] = Field(default_factory=list)
    # Files whose findings are set aside (listed in the report with the reason, never failing
    # it), e.g. copies of the project's libraries its own install rules put elsewhere.
    ignore: list[IgnoreRule] = []
