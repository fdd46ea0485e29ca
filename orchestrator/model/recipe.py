"""The recipe: a human-written TOML saying what to build and in which variants.

Validated strictly (unknown fields are errors); its identity is its parsed content, so
comments and key order never change an artifact id.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from orchestrator.errors import UserError
from orchestrator.model.process_values import MAX_ARG, ArgStr, EnvKey, PathStr
from orchestrator.model.pytorch_options import PyTorchOptions
from orchestrator.model.source_archive import ArchiveSource, OmitUnset, relative_dir
from orchestrator.model.source_git import GitSource
from orchestrator.model.user_file import read_toml
from orchestrator.model.verify_rules import VerifyRules

DefineValue = bool | int | ArgStr
# All of a recipe's flags, defines and env together: well under the kernel's ARG_MAX.
MAX_PROCESS_VALUES = 8 * MAX_ARG
STANDARD_VARIANTS = ("relwithdebinfo", "release", "debug")
# Recipe, variant and lock names (also in cache records and store paths): short and plain.
NAME_RE = r"^[a-z0-9][a-z0-9_.-]{0,99}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PathSource(_Strict, OmitUnset):
    """A directory on disk: relative to the recipes/ folder, or absolute. With patches, the
    build uses a patched copy under the store (the directory itself is never modified)."""
    kind: Literal["path"] = "path"
    omit_unset: ClassVar[tuple[str, ...]] = ("subdir", "patches")
    path: PathStr
    subdir: str | None = None
    patches: list[str] = []

    @field_validator("subdir")
    @classmethod
    def _plain_subdir(cls, v: str | None) -> str | None:
        return relative_dir(v, "subdir")


SourceSpec = Annotated[PathSource | ArchiveSource | GitSource, Field(discriminator="kind")]


class BuildSpec(_Strict, OmitUnset):
    system: Literal["cmake", "setuptools", "pep517", "pytorch"]
    omit_unset: ClassVar[tuple[str, ...]] = ("linker",)
    defines: dict[ArgStr, DefineValue] = {}
    env: dict[EnvKey, ArgStr] = {}
    cflags: list[ArgStr] = []
    targets: list[ArgStr] = []
    # Lock entries the build depends on; None means the build system's default set.
    uses: list[str] | None = None
    # Options of the pytorch build system (see model/pytorch_options.py).
    pytorch: PyTorchOptions | None = None
    # The linker: unset is gcc's own (GNU ld); "mold" is the lock's deb:mold, which `uses`
    # must name (builders/linker.py). Unset leaves the artifact ids of older recipes alone.
    linker: Literal["mold"] | None = None

    @model_validator(mode="after")
    def _pep517_names_its_backend(self) -> BuildSpec:
        if self.system == "pep517" and self.uses is None:
            raise ValueError('build.uses is required with system = "pep517": list the backend\'s '
                             'lock entries (e.g. "pypi:scikit-build-core") so they are part of the id')
        return self

    @model_validator(mode="after")
    def _linker_is_locked(self) -> BuildSpec:
        if self.linker is None:
            return self
        if self.system not in ("cmake", "pytorch"):
            raise ValueError(f'build.linker = "{self.linker}" is for system = "cmake" or '
                             f'"pytorch" builds; remove it or set LDFLAGS in build.env')
        if self.uses is None or f"deb:{self.linker}" not in self.uses:
            raise ValueError(f'build.linker = "{self.linker}" needs "deb:{self.linker}" in '
                             "build.uses (the linker is part of the id)")
        return self


class VariantSpec(_Strict):
    build_type: Literal["RelWithDebInfo", "Release", "Debug", "MinSizeRel"]
    defines: dict[ArgStr, DefineValue] = {}
    env: dict[EnvKey, ArgStr] = {}
    cflags: list[ArgStr] = []
    # Split DWARF (builders/split_dwarf.py): links write skeletons, the .dwo files go beside
    # each installed library. Unset leaves the artifact ids of older recipes alone.
    split_dwarf: bool = False

    @model_validator(mode="after")
    def _split_dwarf_needs_debug_info(self) -> VariantSpec:
        if self.split_dwarf and self.build_type not in ("RelWithDebInfo", "Debug"):
            raise ValueError(f"split_dwarf needs a build type with debug info (RelWithDebInfo or "
                             f"Debug), not {self.build_type}: remove it from this variant")
        return self


class OutputSpec(_Strict):
    """Where the installed prefix keeps things the workspace puts on its paths."""
    lib: list[str] = ["lib"]
    bin: list[str] = ["bin"]
    python: list[str] = ["python"]

    @field_validator("lib", "bin", "python")
    @classmethod
    def _inside_the_prefix(cls, v: list[str], info: Any) -> list[str]:
        """Each a directory of the prefix: "." or a plain relative path (env.sh puts
        <profile>/prefix/<it> on the search paths; '..' would leave the store entry)."""
        for d in v:
            parts = d.split("/")
            if d != "." and any(p in ("", ".", "..") for p in parts) \
                    or not re.fullmatch(r"[A-Za-z0-9_.+/-]{1,200}", d):
                raise ValueError(f"outputs.{info.field_name} {d[:60]!r} must be a plain relative "
                                 "path inside the prefix (letters, digits, . _ + - /)")
        return v


# Where a store entry keeps its locked runtime requirements (`[runtime] requires`): beside the
# prefix, not in it (third-party wheels are not the project's own libraries to verify).
RUNTIME_SITE = "runtime/site-packages"


def _requirement(req: str) -> str:
    """A PEP 508 requirement of a package from the index: a name, version specifiers and
    markers; no URL (the lock pins what the index serves, by sha256)."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        parsed = Requirement(req)
    except InvalidRequirement:
        raise ValueError(f"{req[:80]!r} is not a requirement; write e.g. \"numpy>=1.26\"") from None
    if parsed.url or req != req.strip() or len(req) > 200:
        raise ValueError(f"{req[:80]!r}: a name with version specifiers (no URL, no spaces "
                         "around it, at most 200 characters)")
    return req


class RuntimeSpec(_Strict):
    """What the artifact needs at import time besides the toolchain's own packages."""
    requires: list[Annotated[str, AfterValidator(_requirement)]] = []

    @field_validator("requires")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        from packaging.requirements import Requirement
        from packaging.utils import canonicalize_name

        names = [canonicalize_name(Requirement(r).name) for r in v]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"{twice[0]!r} is required twice; merge its specifiers into one entry")
        return v


class Recipe(_Strict):
    name: str = Field(pattern=NAME_RE)
    description: str = ""
    lock: str = Field(default="toolchain", pattern=NAME_RE)
    source: SourceSpec
    build: BuildSpec
    variants: dict[str, VariantSpec]
    outputs: OutputSpec = OutputSpec()
    verify: VerifyRules = VerifyRules()
    runtime: RuntimeSpec = RuntimeSpec()

    @field_validator("variants")
    @classmethod
    def _variant_names(cls, v: dict[str, VariantSpec]) -> dict[str, VariantSpec]:
        if not v:
            raise ValueError("at least one variant is required")
        for name in v:
            if not re.match(NAME_RE, name):
                raise ValueError(f"variant name {name!r} must match {NAME_RE}")
        return v

    @model_validator(mode="after")
    def _split_dwarf_where_built_by_cmake(self) -> Recipe:
        split = [n for n, v in self.variants.items() if v.split_dwarf]
        if split and self.build.system not in ("cmake", "pytorch"):
            raise ValueError(f"variants.{split[0]}.split_dwarf needs build.system \"cmake\" or "
                             f"\"pytorch\" (the .dwo files are found in a CMake build tree), not "
                             f"{self.build.system!r}: remove it")
        return self

    @model_validator(mode="after")
    def _fits_a_command_line(self) -> Recipe:
        parts: list[BuildSpec | VariantSpec] = [self.build, *self.variants.values()]
        total: int = sum(len(str(x).encode()) for p in parts
                    for x in [*p.cflags, *p.defines, *p.defines.values(), *p.env, *p.env.values()])
        if total > MAX_PROCESS_VALUES:
            raise ValueError(f"cflags, defines and env add up to {total} bytes; at most "
                             f"{MAX_PROCESS_VALUES} fit the build's command lines")
        return self


def path_outputs(recipe: Recipe) -> dict[str, list[str]]:
    """recipe.outputs as the workspace, the IDE files and `doit run` take it, plus "runtime":
    the store entry's directories (relative to the entry, not the prefix) of locked runtime
    requirements that go on PYTHONPATH after the prefix's own (none without `[runtime]`)."""
    return {**recipe.outputs.model_dump(), "runtime": [RUNTIME_SITE] if recipe.runtime.requires else []}


class ResolvedVariant(_Strict):
    """A variant's options after merging the recipe-wide build section into it."""
    name: str
    build_type: str
    defines: dict[str, DefineValue]
    env: dict[str, str]
    cflags: list[str]
    targets: list[str]
    split_dwarf: bool = False  # left out of the derivation while unset (plan/derivation.py)


def resolve_variant(recipe: Recipe, variant: str, *, where: str) -> ResolvedVariant:
    if variant not in recipe.variants:
        known = ", ".join(sorted(recipe.variants))
        same = [v for v in recipe.variants if v.lower() == variant.lower()]  # names are exact
        hint = f" (did you mean variant={same[0]}?)" if same else ""
        raise UserError(f"{where}: unknown variant {variant!r}{hint}; this recipe has: {known}")
    v = recipe.variants[variant]
    return ResolvedVariant(
        name=variant,
        build_type=v.build_type,
        defines={**recipe.build.defines, **v.defines},
        env={**recipe.build.env, **v.env},
        cflags=[*recipe.build.cflags, *v.cflags],
        targets=list(recipe.build.targets),
        split_dwarf=v.split_dwarf,
    )


def describe_validation_error(err: ValidationError) -> str:
    """The first problem of a pydantic error as 'field.path: message'."""
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"] if not str(p).startswith("function-")) or "(top)"
    return f"{loc}: {first['msg']}"


def recipe_path(recipes_dir: Path, name: str) -> Path:
    if not re.match(NAME_RE, name):
        known = {p.stem for p in recipes_dir.glob("*.toml")}
        hint = f"; did you mean recipe={name.lower()}?" if name.lower() in known else ""
        raise UserError(f"recipe name {name!r} is not valid: use lower-case letters, digits, "
                        f"'-', '_'{hint}")
    path = recipes_dir / f"{name}.toml"
    if not path.is_file():
        listed = ", ".join(sorted(p.stem for p in recipes_dir.glob("*.toml"))) or "none"
        raise UserError(f"unknown recipe {name!r}: no {path}; known recipes: {listed}")
    return path


def load_recipe(recipes_dir: Path, name: str) -> Recipe:
    """Parse and validate recipes/<name>.toml; any problem is one UserError line."""
    path = recipe_path(recipes_dir, name)
    data = read_toml(path, "fix the recipe")
    data.setdefault("name", name)
    if data["name"] != name:
        if not isinstance(data["name"], str):
            raise UserError(f"{path}: name must be a string; fix the recipe")
        raise UserError(f"{path}: name = {data['name'][:80]!r} does not match the file name {name!r}")
    try:
        return Recipe.model_validate(data)
    except ValidationError as e:
        raise UserError(f"{path}: {describe_validation_error(e)}; fix the recipe") from None
