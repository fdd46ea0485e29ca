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

import re
from typing import Literal
from urllib.parse import urlsplit

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
        return git_url(v)


ALLOWED_SCHEMES = ("https", "http", "ssh", "git", "file")
# scp form: user@host:path (git's own test: no slash before the first colon). Neither part
# may start with "-": git would take it for an option.
SCP_FORM = re.compile(r"^(?P<user>[A-Za-z0-9_][A-Za-z0-9._-]*)@(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*)"
                      r":(?P<path>[^-].*)$")
HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*(:[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$")


def git_url(v: str) -> str:
    """A git URL as a URL: https/http/ssh/git/file with a host that is not an option (file:
    an absolute path), the scp form user@host:path, or an absolute path. No whitespace or
    control characters, no transport helpers (`ext::`, `fd::`), nothing starting with "-"."""
    what = f"url {v[:80]!r}"
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in v) or v.startswith("-"):
        raise ValueError(f"{what} has whitespace, a control character or a leading '-'; "
                         "give a plain https://, ssh://, git://, file:// URL, user@host:path "
                         "or an absolute path")
    if v.startswith("/"):
        return v
    if "://" in v:
        parsed = urlsplit(v)
        if parsed.scheme not in ALLOWED_SCHEMES:
            raise ValueError(f"{what}: scheme {parsed.scheme!r} is not one of "
                             f"{', '.join(ALLOWED_SCHEMES)}")
        host = parsed.netloc.rpartition("@")[2]
        if parsed.scheme == "file":
            if host not in ("", "localhost") or not parsed.path.startswith("/"):
                raise ValueError(f"{what}: a file:// URL names an absolute local path "
                                 "(file:///srv/git/proj.git)")
        elif not HOST.match(host) or parsed.netloc.startswith("-"):
            raise ValueError(f"{what}: {host[:40]!r} is not a host name")
        return v
    if SCP_FORM.match(v):
        return v
    raise ValueError(f"{what} must be https://, ssh://, git://, file://, user@host:path "
                     "or an absolute path")
