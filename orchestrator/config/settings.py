"""Everything a command needs to know, from doit's `name=value` variables and the environment."""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.config.cli_vars import BOOLEANS, KNOWN
from orchestrator.errors import UserError


def parse_bool(name: str, value: str) -> bool:
    """The one reading of a boolean variable: 1/true/yes/on or 0/false/no/off (any case);
    anything else, the empty value included, is bad input naming the variable."""
    v = value.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise UserError(f"variable {name}={value!r} is not a boolean; use {name}=1 or {name}=0")


def directory_var(name: str, value: str, *, may_create: bool, create: bool = False) -> Path:
    """A directory variable (store=, workspace=) the kernel accepts and we can use: an
    existing directory, or (may_create) a new one in an existing directory — or, with
    create=1, under the nearest existing parent (a typo'd path is an error naming it)."""
    from orchestrator.model.process_values import check_path

    try:
        path = Path(check_path(value)).expanduser().absolute()
        check_path(str(path))
    except ValueError as e:
        raise UserError(f"{name}={value[:80]!r}: {e}; pass another path") from None
    try:
        if path.is_dir():
            if may_create and not os.access(path, os.W_OK | os.X_OK):
                raise UserError(f"{name}={path}: not writable; pass a directory you own")
            return path
        if path.exists() or path.is_symlink() or not may_create:
            what = "not a directory" if path.exists() else "no such directory"
            raise UserError(f"{name}={path}: {what}; pass a directory")
        if not create and not path.parent.is_dir():
            raise UserError(f"{name}={path}: {path.parent} does not exist; pass an existing "
                            f"directory's path, or add create=1 to create it")
        parent = next(p for p in path.parents if p.exists())
        if not parent.is_dir():
            raise UserError(f"{name}={path}: {parent} is not a directory; pass another path")
        os.rmdir(tempfile.mkdtemp(prefix=".orch-probe-", dir=parent))
    except OSError as e:
        raise UserError(f"{name}={path}: cannot create it ({e.strerror or e}); pass another path") from None
    return path


COMPILE_CACHES = ("ccache", "sccache", "off")


def parse_compile_cache(value: str) -> str:
    """compile_cache=ccache (the default) | sccache | off; a boolean means ccache or off."""
    v = value.strip().lower()
    if v in COMPILE_CACHES:
        return v
    try:
        return "ccache" if parse_bool("compile_cache", v) else "off"
    except UserError:
        raise UserError(f"compile_cache={value!r}: use compile_cache=ccache, sccache or off") from None


@dataclass
class Settings:
    repo_root: Path
    store_root: Path
    workspace: Path
    recipe: str = "demo"
    variant: str = "relwithdebinfo"
    jobs: int = field(default_factory=lambda: os.cpu_count() or 1)
    fmt: str = "table"
    substitute: bool = True
    commit_failed: bool = False  # commit although verify failed (was force=1)
    rebuild: bool = False        # build again although the id is present; compare
    check: bool = False          # reproducibility check: rebuild elsewhere, uncached; compare
    compile_cache: str = "ccache"
    keep_going: bool = False
    vars: dict[str, str] = field(default_factory=dict)
    # recipe -> git entry ({url, rev, commit, tree, submodules}) resolved at run time
    # (nightly branch tracking); used instead of locks/git-sources.json
    tracked_sources: dict[str, dict] = field(default_factory=dict)

    @property
    def recipes_dir(self) -> Path:
        return self.repo_root / "recipes"

    @property
    def locks_dir(self) -> Path:
        return self.repo_root / "locks"

    def flag(self, name: str, default: bool = False) -> bool:
        """Boolean variable `name` (checked by from_vars), or default when not given."""
        return parse_bool(name, self.vars[name]) if name in self.vars else default

    @classmethod
    def from_vars(cls, repo_root: Path, variables: dict[str, str]) -> Settings:
        if "force" in variables:
            raise UserError("force= is renamed: use commit_failed=1 to commit although verify "
                            "failed, rebuild=1 to build again")
        unknown = sorted(set(variables) - KNOWN)
        if unknown:
            raise UserError(f"unknown variable {unknown[0]!r}; known: {', '.join(sorted(KNOWN))}")
        for name in sorted(BOOLEANS & set(variables)):  # every boolean read one way, up front
            parse_bool(name, variables[name])
        env_store = os.environ.get("ORCH_STORE")
        store = variables.get("store") or env_store or str(repo_root / "artifacts")
        # A developer's checkout (source=PATH) is its own workspace unless told otherwise.
        workspace = variables.get("workspace") or variables.get("source") or str(repo_root)
        ws = directory_var("workspace", workspace, may_create=False)
        store_root = directory_var("store", store, may_create=True,
                                   create=parse_bool("create", variables.get("create", "0")))
        jobs_raw = variables.get("jobs") or os.environ.get("MAX_JOBS") or str(os.cpu_count() or 1)
        try:
            jobs = int(jobs_raw)
            if jobs < 1:
                raise ValueError
        except ValueError:
            raise UserError(f"jobs={jobs_raw!r} is not a positive integer") from None
        fmt = variables.get("format", "table")
        if fmt not in ("table", "json"):
            raise UserError(f"format={fmt!r}: use format=table or format=json")
        return cls(
            repo_root=repo_root.absolute(),
            store_root=store_root,
            workspace=ws,
            recipe=variables.get("recipe", "demo"),
            variant=variables.get("variant", "relwithdebinfo"),
            jobs=jobs,
            fmt=fmt,
            substitute=parse_bool("substitute", variables.get("substitute", "1")),
            commit_failed=parse_bool("commit_failed", variables.get("commit_failed", "0")),
            rebuild=parse_bool("rebuild", variables.get("rebuild", "0")),
            check=parse_bool("check", variables.get("check", "0")),
            compile_cache=parse_compile_cache(variables.get("compile_cache", "ccache")),
            keep_going=parse_bool("keep_going", variables.get("keep_going", "0")),
            vars=dict(variables),
        )
