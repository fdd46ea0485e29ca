"""The lock: every input that can change a build's output, each pinned by a content hash.

`locks/<name>.toml` (human-written spec) is resolved by `doit lock` into
`locks/<name>.lock.json` (machine-written, sorted keys). Entries are keyed
`<kind>:<name>` and discriminated by `kind`, so new sources slot in as new kinds.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from orchestrator.hashing import digest_of

SHA256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


def _pep440(v: str) -> str:
    from packaging.version import InvalidVersion, Version

    try:
        Version(v)
    except InvalidVersion:
        raise ValueError(f"{v[:60]!r} is not a PEP 440 version") from None
    if v != v.strip():
        raise ValueError(f"{v[:60]!r} is not a PEP 440 version")
    return v


def _absolute_path(v: str) -> str:
    parts = v.split("/")
    if not v.startswith("/") or ".." in parts or any(ord(c) < 32 for c in v):
        raise ValueError(f"{v[:80]!r} must be an absolute path without '..' or control characters")
    return v


# Every field below reaches a command line (pip's requirements, apt, dpkg) or a path: each is
# checked to its type, so no value can become an option or leave its directory.
PEP440 = Annotated[str, Field(max_length=100), AfterValidator(_pep440)]
PYPI_NAME = Annotated[str, Field(pattern=r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,200}[A-Za-z0-9])?$")]
DEB_NAME = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9+.-]{0,200}$")]
DEB_VERSION = Annotated[str, Field(pattern=r"^[0-9][A-Za-z0-9.+~:-]{0,200}$")]
ARCH = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,40}$")]
FILE_NAME = Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9._+%~-]{0,250}$")]
ABS_PATH = Annotated[str, Field(max_length=4096), AfterValidator(_absolute_path)]


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.name}"  # type: ignore[attr-defined]

    def digest(self) -> str:
        return digest_of(self.model_dump(mode="json"))


class PythonEntry(_Entry):
    """The system interpreter the build venv is made from (never conda's: static libpython)."""
    kind: Literal["python"] = "python"
    path: ABS_PATH
    version: PEP440
    soabi: str
    ext_suffix: str
    sha256: SHA256
    libpython_soname: str | None

    @property
    def key(self) -> str:
        return "python"


class PypiEntry(_Entry):
    kind: Literal["pypi"] = "pypi"
    name: PYPI_NAME
    version: PEP440
    filename: FILE_NAME
    sha256: SHA256


class DebEntry(_Entry):
    """A Debian package, unpacked (never installed) into the toolchain.

    `suite` and `pool` are set for a package of a suite the machine's apt sources do not list
    (CUDA 12.4 from trixie's non-free): it is fetched from the mirror the machine's sources
    name, at `<pool>/<filename>`, by sha256; `omit`: file-name patterns of members not
    unpacked (the gigabytes of static libraries nvidia-cuda-dev carries). Entries without them
    dump exactly as they did (same digests)."""
    kind: Literal["deb"] = "deb"
    name: DEB_NAME
    version: DEB_VERSION
    arch: ARCH
    sha256: SHA256
    filename: FILE_NAME
    suite: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,40}$")] | None = None
    pool: Annotated[str, Field(pattern=r"^pool/[a-z-]+(/[A-Za-z0-9+.~_-]+){2}$")] | None = None
    omit: tuple[Annotated[str, Field(pattern=r"^[A-Za-z0-9_+.*?\[\]-]{1,100}$")], ...] | None = None
    # Unpacked into <toolchain>/debs/<tree> instead of debs/root: a program's own runtime
    # (cuda-gdb's trixie libc and libstdc++), kept off every library path of the build.
    tree: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,40}$")] | None = None

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if v is not None or k not in ("suite", "pool", "omit", "tree")}


class ProgramPin(BaseModel):
    """A program a compiler driver runs (cc1plus, as, ld), pinned by content."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    path: ABS_PATH
    sha256: SHA256


class CompilerEntry(_Entry):
    """A compiler driver found on the machine (an impure input, checked at every use).

    `programs` pins what the driver runs (`-print-prog-name`: cc1/cc1plus, as, ld); entries
    written before it existed have none, and dump exactly as they did (same digests)."""
    kind: Literal["compiler"] = "compiler"
    path: ABS_PATH
    version: str
    sha256: SHA256
    programs: dict[str, ProgramPin] | None = None

    @model_serializer(mode="wrap")
    def _without_unset_programs(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("programs") is None:
            data.pop("programs", None)
        return data


class SystemPackageEntry(_Entry):
    """A Debian package the build links against from the system (checked, not fetched)."""
    kind: Literal["syspkg"] = "syspkg"
    name: DEB_NAME
    version: DEB_VERSION
    arch: ARCH


class CondaEntry(_Entry):
    """A package from a conda-lock file (recorded and hashed; platform-specific)."""
    kind: Literal["conda"] = "conda"
    version: str
    platform: str
    url_filename: str
    sha256: SHA256 | None = None
    md5: str | None = None


class TorchAbiEntry(_Entry):
    """Facts read from the locked torch wheel that builds against it must match."""
    kind: Literal["torch"] = "torch"
    version: PEP440
    cxx11_abi: bool


class CudaToolkitEntry(_Entry):
    """The CUDA toolkit assembled from locked wheels (`[cuda]` of the spec): one root
    (`root`, relative to site-packages, e.g. nvidia/cu13) that the toolchain lays out as a
    CUDA install (lib64, unversioned .so links, version.json). `packages`: the wheels it is
    made of, name -> sha256, so the entry's digest changes with any of them; `layout`: the
    version of that layout (bumped when the assembly changes)."""
    kind: Literal["cuda"] = "cuda"
    name: Literal["toolkit"] = "toolkit"
    version: PEP440
    root: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+(/[A-Za-z0-9_-]+)*$")]
    packages: dict[Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9.+_-]{0,200}$")], SHA256]
    layout: int = 1
    # "pypi": wheels, root relative to site-packages; "deb": Debian packages (`deb:<name>`
    # entries), root relative to the unpacked debs (where nvcc's tools are). Dumped only
    # when "deb" (the wheel toolkits' digests are as they were).
    origin: Literal["pypi", "deb"] = "pypi"

    @model_serializer(mode="wrap")
    def _without_default_origin(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("origin") == "pypi":
            data.pop("origin")
        return data


LockEntry = Annotated[
    PythonEntry | PypiEntry | DebEntry | CompilerEntry | SystemPackageEntry | CondaEntry | TorchAbiEntry
    | CudaToolkitEntry,
    Field(discriminator="kind"),
]


class Lock(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: Literal[1] = 1
    name: str
    spec_sha256: SHA256
    platform: dict[str, str]
    entries: dict[str, LockEntry]

    def get(self, key: str) -> LockEntry:
        return self.entries[key]

    def digest(self) -> str:
        return digest_of(self.model_dump(mode="json"))


class PythonSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    interpreter: str = "/usr/bin/python3"


class PypiSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    requirements: list[str] = []


class DebSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    packages: list[str] = []
    # Dependencies never to pull in even when the system lacks them (e.g. -dev packages
    # a tool declares but does not need at run time).
    exclude: list[str] = []


class SystemSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    packages: list[str] = []


class CondaSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lockfile: str
    platform: str = "linux-64"


class CudaDebSpec(BaseModel):
    """`[cuda.debs]`: the toolkit from Debian packages of a suite the machine's apt sources
    need not list (read from the mirror they name, with a private apt configuration). Exactly
    `packages` are pinned (their dependencies are not followed: list what nvcc needs);
    `omit`: per package, file-name patterns of members not unpacked."""
    model_config = ConfigDict(extra="forbid")
    suite: str
    components: list[str] = ["main", "non-free"]
    packages: list[str]
    omit: dict[str, list[str]] = {}


class CudaSpec(BaseModel):
    """`[cuda]`: the toolkit's wheels (all into one root of site-packages, e.g. nvidia/cu13);
    resolved with [pypi] and pinned like it, plus one `cuda:toolkit` entry. Or, with
    `[cuda.debs]` instead of requirements, from Debian packages."""
    model_config = ConfigDict(extra="forbid")
    requirements: list[str] = []
    root: str = "nvidia/cu13"
    debs: CudaDebSpec | None = None
    # `[cuda.gdb]`: Debian's nvidia-cuda-gdb with the libraries of its own suite (it needs a
    # newer glibc than the machine's), unpacked apart and run through that suite's loader.
    gdb: CudaDebSpec | None = None

    @model_validator(mode="after")
    def _one_source(self) -> CudaSpec:
        if self.requirements and self.debs is not None:
            raise ValueError("[cuda] has both requirements (wheels) and [cuda.debs]; a toolkit "
                             "comes from one of them")
        if not self.requirements and self.debs is None:
            raise ValueError("[cuda] names no toolkit; give requirements (wheels) or [cuda.debs]")
        return self


class LockSpec(BaseModel):
    """`locks/<name>.toml`: what to resolve."""
    model_config = ConfigDict(extra="forbid")
    python: PythonSpec = PythonSpec()
    pypi: PypiSpec = PypiSpec()
    deb: DebSpec = DebSpec()
    compilers: dict[str, str] = {}
    system: SystemSpec = SystemSpec()
    conda: CondaSpec | None = None
    cuda: CudaSpec | None = None
