"""Recipe schema of a git source: a repository URL and a revision, resolved by `doit lock`.

```toml
[source]
kind = "git"
url = "https://github.com/pybind/cmake_example.git"   # or file:///srv/git/proj.git
rev = "v1.0"            # a commit, tag or branch; `doit lock` pins it to a commit
submodules = true       # fetch submodules (recursively) at the commits the tree records
subdir = "cpp"          # optional: build this directory of the checkout
patches = ["proj/0001-fix.patch"]  # relative to recipes/, applied to the store's copy
```
The identity is the pinned commit's tree (and its submodules' commits), not the URL.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from orchestrator.model.source_archive import relative_dir


class GitSource(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["git"] = "git"
    url: str = Field(min_length=1, max_length=2000)
    rev: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/+-]*$")
    submodules: bool = False
    subdir: str | None = None
    patches: list[str] = []

    @field_validator("subdir")
    @classmethod
    def _plain_subdir(cls, v: str | None) -> str | None:
        return relative_dir(v, "subdir")

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, v: str) -> str:
        if not (v.startswith(("https://", "http://", "ssh://", "git://", "file://", "/"))
                or "@" in v.split(":", 1)[0]):
            raise ValueError(f"url {v[:80]!r} must be https://, ssh://, git://, file:// or a path")
        return v
