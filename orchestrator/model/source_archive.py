"""Recipe schema of a pinned source archive: a tarball by sha256, overlays, ordered patches.

```toml
[source]
kind = "archive"
file = "pytorch_1.13.1+dfsg.orig.tar.xz"
sha256 = "d035…"
fetch = { apt_source = "pytorch=1.13.1+dfsg-4" }   # or { url = "https://…" }
patches = ["pytorch/patches/0001-drop-foxi.patch"]   # relative to recipes/, applied in order

[[source.overlays]]                                  # a pinned source placed inside the tree
path = "third_party/fmt"
file = "fmtlib_9.1.0+ds1.orig.tar.gz"
sha256 = "84ce…"
fetch = { apt_source = "fmtlib=9.1.0+ds1-2" }
```
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SHA256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
FILE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.+~-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Fetch(_Strict):
    """Where a missing archive comes from: a URL, or Debian's source archive via apt."""
    url: str | None = None
    apt_source: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9.+-]*=[A-Za-z0-9.+:~-]+$")


class Archive(_Strict):
    """One tarball, found by file name in the archive cache and checked by sha256."""
    file: str = Field(pattern=FILE_NAME)
    sha256: SHA256
    strip_components: int = Field(default=1, ge=0)
    fetch: Fetch = Fetch()


class Overlay(Archive):
    """An archive unpacked at `path` inside the main tree (e.g. an emptied submodule)."""
    path: str

    @field_validator("path")
    @classmethod
    def _relative(cls, v: str) -> str:
        parts = v.split("/")
        if v.startswith("/") or not v or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"overlay path {v!r} must be a plain relative path inside the tree")
        return v


class ArchiveSource(Archive):
    kind: Literal["archive"] = "archive"
    overlays: list[Overlay] = []
    # Patch files relative to recipes/, applied with `patch -p1` in this order.
    patches: list[str] = []
