"""Recipe schema of a pinned source archive: a tarball by sha256, overlays, ordered patches.

```toml
[source]
kind = "archive"
file = "pytorch_1.13.1+dfsg.orig.tar.xz"
sha256 = "d035…"
fetch = { apt_source = "pytorch=1.13.1+dfsg-4" }   # or { url = "https://…" / "file://…" },
                                                     # or { pypi = "name==version" } (an sdist)
subdir = "cpp"                                       # optional: build this directory of the tree
patch_checkouts = true                               # optional: source=PATH gets overlays + patches too
patches = ["pytorch/patches/0001-drop-foxi.patch"]   # relative to recipes/, applied in order

[[source.overlays]]                                  # a pinned source placed inside the tree
path = "third_party/fmt"
file = "fmtlib_9.1.0+ds1.orig.tar.gz"
sha256 = "84ce…"
fetch = { apt_source = "fmtlib=9.1.0+ds1-2" }

[[source.overlays]]                                  # one directory of a tarball
path = "third_party/pocketfft"
file = "pytorch_2.6.0+dfsg-7.debian.tar.xz"
archive_dir = "debian/pocketfft-9d3ab05a7fffbc71a492bc6a17be034e83e8f0fe"
sha256 = "3290…"
```
"""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

SHA256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
FILE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.+~-]*$"


def _relative(v: str, field: str) -> str:
    parts = v.split("/")
    if v.startswith("/") or not v or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"overlay {field} {v!r} must be a plain relative path")
    return v


def relative_dir(v: str | None, field: str) -> str | None:
    """A source's subdir: None, or a plain relative path (no '..', not absolute)."""
    if v is None:
        return None
    parts = v.split("/")
    if v.startswith("/") or not v or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"{field} {v!r} must be a plain relative path inside the source")
    return v


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OmitUnset(BaseModel):
    """Fields added after recipes existed leave the dump (hence the artifact id) alone when
    unset: a recipe that does not use them keeps its id."""
    omit_unset: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for k in self.omit_unset:
            if data.get(k) in (None, []):
                data.pop(k, None)
        return data


class Fetch(_Strict, OmitUnset):
    """Where a missing archive comes from: a URL (https://, file://), Debian's source archive
    via apt, or a PyPI sdist by `name==version` (pip download --no-binary :all:)."""
    url: str | None = None
    apt_source: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9.+-]*=[A-Za-z0-9.+:~-]+$")
    pypi: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+$")
    omit_unset: ClassVar[tuple[str, ...]] = ("pypi",)

    @model_validator(mode="after")
    def _one_way(self) -> Fetch:
        given = [k for k in ("url", "apt_source", "pypi") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"fetch gives {' and '.join(given)}; give one of url, apt_source, pypi")
        return self


class Archive(_Strict):
    """One tarball, found by file name in the archive cache and checked by sha256."""
    file: str = Field(pattern=FILE_NAME)
    sha256: SHA256
    strip_components: int = Field(default=1, ge=0)
    fetch: Fetch = Fetch()


class Overlay(Archive):
    """An archive unpacked at `path` inside the main tree (e.g. an emptied submodule).

    `archive_dir` takes only that directory of the archive (its contents land at `path`;
    strip_components is then not used), e.g. a snapshot carried in a Debian tarball."""
    path: str
    archive_dir: str | None = None

    @field_validator("archive_dir")
    @classmethod
    def _plain_dir(cls, v: str | None) -> str | None:
        if v is not None:
            _relative(v, "archive_dir")
        return v

    @field_validator("path")
    @classmethod
    def _relative_path(cls, v: str) -> str:
        return _relative(v, "path")


class ArchiveSource(Archive, OmitUnset):
    kind: Literal["archive"] = "archive"
    omit_unset: ClassVar[tuple[str, ...]] = ("subdir", "patch_checkouts")
    overlays: list[Overlay] = []
    # Patch files relative to recipes/, applied with `patch -p1` in this order.
    patches: list[str] = []
    # Build this directory of the unpacked tree (e.g. an sdist's C++ project in pkg/).
    subdir: str | None = None
    # source=PATH builds a copy of that checkout with these overlays (into its empty or
    # missing directories only) and patches applied; unset: the checkout as it is.
    patch_checkouts: bool | None = None

    @field_validator("subdir")
    @classmethod
    def _plain_subdir(cls, v: str | None) -> str | None:
        return relative_dir(v, "subdir")
