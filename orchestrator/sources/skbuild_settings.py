"""What a scikit-build-core tree's pyproject.toml asks CMake for (PyTorch from 2.14 on), read
as the locked scikit-build-core would: [tool.scikit-build] after its [[overrides]] matched
against the build's environment, cmake.define's values in CMake's spelling, cmake.args,
cmake.source-dir, minimum-version and build-system.requires checked against the version
read. Anything this reader does not follow is one line naming what was found."""
from __future__ import annotations

import copy
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from orchestrator.errors import UserError
from orchestrator.model.lock import Lock

# The scikit-build-core whose settings semantics this reader follows (locks/toolchain.toml
# pins it); a recipe whose lock pins pypi:scikit-build-core is read as that version.
SKBUILD_VERSION = "1.1.0"
# Override conditions read here; the others (failed, from-sdist, system-cmake, cmake-wheel,
# abi-flags, python-version, implementation-*, platform-node, config-settings) are refused.
CONDITIONS = ("env", "platform-system", "platform-machine", "scikit-build-version", "state")
# `pip install --no-build-isolation -e .`, the developer's command on a 2.14 tree.
STATE = "editable"
FALSE_WORDS = ("n", "no", "off", "false", "f")


@dataclass(frozen=True)
class SkbuildConfig:
    """The CMake configuration a [tool.scikit-build] table resolves to for one build."""
    source_subdir: str               # the tree's CMake entry point (cmake.source-dir), relative
    defines: dict[str, str]          # cmake.define, in CMake's spelling
    args: list[str]                  # cmake.args, after the -D list as scikit-build-core does
    table_build_type: str            # what the table says (the variant's build type wins)
    minimum_version: str | None
    read_as: str                     # the scikit-build-core version its semantics follow
    matched: list[str] = field(default_factory=list)  # which overrides applied, and why


def version_in(lock: Lock) -> str:
    """The scikit-build-core a recipe's lock pins, else the one this reader follows."""
    entry = lock.entries.get("pypi:scikit-build-core")
    return entry.version if entry is not None and entry.version else SKBUILD_VERSION


def env_true(value: str) -> bool:
    """An environment value as scikit-build-core's if.env = true/false reads it."""
    if not value:
        return False
    value = value.lower()
    return bool(int(value)) if value.isdigit() else value not in FALSE_WORDS


def _regex(value: str, pattern: Any, what: str, where: str) -> bool:
    try:
        return re.search(str(pattern), value) is not None
    except re.error as e:
        raise UserError(f"{where}: {what} = {pattern!r} is not a regular expression ({e})") from None


def _results(cond: dict[str, Any], env: dict[str, str], version: str,
             where: str) -> dict[str, bool]:
    """Each condition of an `if` table → whether it holds; if.env counts per variable
    (env.NAME), as scikit-build-core counts them for `any`."""
    out: dict[str, bool] = {}
    for key, want in cond.items():
        if key not in CONDITIONS:
            raise UserError(f"{where}: [[tool.scikit-build.overrides]] if.{key} is a condition "
                            f"the pytorch builder does not read (it reads {', '.join(CONDITIONS)}, "
                            "any, not); build this tree with its own `pip install -e .`")
        if key == "env":
            if not isinstance(want, dict):
                raise UserError(f"{where}: if.env must be a table of variable = true/false/regex")
            for var, w in want.items():
                out[f"env.{var}"] = (env_true(env.get(var, "")) == w if isinstance(w, bool) else
                                     var in env and _regex(env[var], w, f"if.env.{var}", where))
        elif key == "scikit-build-version":
            try:
                out[key] = SpecifierSet(str(want)).contains(version, prereleases=True)
            except InvalidSpecifier:
                raise UserError(f"{where}: if.scikit-build-version = {want!r} is not a "
                                "version specifier") from None
        else:
            current = {"platform-system": platform.system(),
                       "platform-machine": platform.machine(), "state": STATE}[key]
            out[key] = _regex(current, want, f"if.{key}", where)
    return out


def _matches(cond: dict[str, Any], env: dict[str, str], version: str, where: str) -> list[str]:
    """The conditions that made one `if` table apply (empty: it does not): all of its plain
    conditions, at least one of if.any's, none of if.not's."""
    cond = dict(cond)
    groups = {}
    for key in ("any", "not"):
        if key in cond:
            inner = cond.pop(key)
            if not isinstance(inner, dict) or not inner:
                raise UserError(f"{where}: if.{key} must be a non-empty table of conditions")
            groups[key] = _results(inner, env, version, where)
    plain = _results(cond, env, version, where)
    if not all(plain.values()):
        return []
    if "any" in groups and not any(groups["any"].values()):
        return []
    if "not" in groups and any(groups["not"].values()):
        return []
    return [*plain, *(k for k, ok in groups.get("any", {}).items() if ok),
            *(f"not {k}" for k in groups.get("not", {}))]


def _joined(value: Any, previous: Any, mode: str, where: str, name: str) -> Any:
    """inherit.<name> = none | append | prepend, as scikit-build-core joins them."""
    if mode not in ("none", "append", "prepend"):
        raise UserError(f"{where}: inherit.{name} = {mode!r}; it is none, append or prepend")
    if mode == "none" or previous is None:
        return value
    if isinstance(value, list) and isinstance(previous, list):
        return [*previous, *value] if mode == "append" else [*value, *previous]
    if isinstance(value, dict) and isinstance(previous, dict):
        return {**previous, **value} if mode == "append" else {**value, **previous}
    raise UserError(f"{where}: inherit.{name} = {mode!r} joins lists or tables only")


def apply_overrides(table: dict[str, Any], env: dict[str, str], version: str,
                    where: str) -> list[str]:
    """[[overrides]] in order: a matching one replaces the keys it names (one level of
    tables deep, so cmake.define is replaced whole unless inherit.cmake.define says append)."""
    matched: list[str] = []
    for n, override in enumerate(table.pop("overrides", []) or [], start=1):
        if not isinstance(override, dict):
            raise UserError(f"{where}: [[tool.scikit-build.overrides]] #{n} is not a table")
        override = dict(override)
        cond = override.pop("if", None)
        if not isinstance(cond, dict) or not cond:
            raise UserError(f"{where}: [[tool.scikit-build.overrides]] #{n} has no `if` table")
        inherit = override.pop("inherit", {})
        passed = _matches(cond, env, version, where)
        if not passed:
            continue
        matched.append(f"#{n} ({' and '.join(passed)})")
        for key, value in override.items():
            if isinstance(value, dict):
                inner = dict(table.get(key) or {})
                modes = inherit.get(key, {}) if isinstance(inherit, dict) else {}
                for key2, value2 in value.items():
                    mode = modes.get(key2, "none") if isinstance(modes, dict) else "none"
                    inner[key2] = _joined(value2, inner.get(key2), mode, where, f"{key}.{key2}")
                table[key] = inner
            else:
                mode = inherit.get(key, "none") if isinstance(inherit, dict) else "none"
                table[key] = _joined(value, table.get(key), mode, where, key)
    return matched


def define_text(name: str, value: Any, env: dict[str, str], where: str) -> str | None:
    """One cmake.define value: bool → TRUE/FALSE, list → ;-joined (inner ; escaped), a
    {env, default} table → that variable's value or the default (None: not passed)."""
    if isinstance(value, dict):
        if "env" not in value:
            raise UserError(f"{where}: cmake.define.{name} is a table without `env`")
        default = value.get("default")
        got = env.get(str(value["env"]), default)
        if isinstance(default, bool) and isinstance(got, str):
            got = env_true(got)
        value = got
        if value is None:
            return None
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, list):
        return ";".join(str(v).replace(";", r"\;") for v in value)
    if isinstance(value, str):
        return value
    raise UserError(f"{where}: cmake.define.{name} = {value!r}; scikit-build-core takes a "
                    "string, a boolean, a list or an {env, default} table")


def required_version(requires: list[str], where: str) -> list[Requirement]:
    out = []
    for text in requires:
        try:
            req = Requirement(str(text))
        except InvalidRequirement as e:
            raise UserError(f"{where}: [build-system] requires {text!r} is not a requirement "
                            f"({e})") from None
        if req.name.lower().replace("_", "-") == "scikit-build-core":
            out.append(req)
    return out


def checked_minimum(minimum: Any, reqs: list[Requirement], version: str,
                    where: str) -> str | None:
    """minimum-version (or "build-system.requires": that requirement's lower bound), refused
    when it is newer than the scikit-build-core it is read as."""
    if minimum == "build-system.requires":
        bounds = [s.version for r in reqs for s in r.specifier if s.operator in (">=", "==", "~=")]
        if not bounds:
            raise UserError(f"{where}: minimum-version = \"build-system.requires\" but [build-system] "
                            "requires names no scikit-build-core>=X")
        minimum = bounds[0]
    if minimum is not None:
        try:
            too_new = Version(str(minimum)) > Version(version)
        except InvalidVersion:
            raise UserError(f"{where}: [tool.scikit-build] minimum-version = {minimum!r} is not "
                            "a version") from None
        if too_new:
            raise UserError(f"{where}: [tool.scikit-build] minimum-version = \"{minimum}\" but the "
                            f"pytorch builder reads it as scikit-build-core {version}; pin "
                            f"scikit-build-core>={minimum} in the recipe's lock, or use an older tree")
    return None if minimum is None else str(minimum)


def checked_requires(pyproject: dict[str, Any], version: str, where: str) -> list[Requirement]:
    """[build-system] requires' scikit-build-core entries, refused when `version` is outside."""
    system = pyproject.get("build-system", {})
    requires = system.get("requires", []) if isinstance(system, dict) else []
    if not isinstance(requires, list):
        raise UserError(f"{where}: [build-system] requires = {requires!r} is not a list")
    reqs = required_version(requires, where)
    for req in reqs:
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            raise UserError(f"{where}: [build-system] requires {str(req)!r} but the pytorch builder "
                            f"reads [tool.scikit-build] as scikit-build-core {version}; pin a "
                            "matching pypi:scikit-build-core in the recipe's lock, or use an older tree")
    return reqs


def checked_source_dir(src: Path, cmake: dict[str, Any], has_table: bool, where: str) -> str:
    """cmake.source-dir, relative to the tree, refused unless it holds a CMakeLists.txt."""
    subdir = str(cmake.get("source-dir", "."))
    source_dir = (src / subdir).resolve()
    if not source_dir.is_relative_to(src.resolve()):
        raise UserError(f"{where}: cmake.source-dir = {subdir!r} is outside the tree")
    if not (source_dir / "CMakeLists.txt").is_file():
        found = (f"cmake.source-dir = {cmake['source-dir']!r}" if "source-dir" in cmake
                 else "no cmake.source-dir" if has_table else "no [tool.scikit-build] table")
        raise UserError(f"{where}: build-backend scikit_build_core.build, {found}, and "
                        f"{source_dir} has no CMakeLists.txt; is this a PyTorch checkout?")
    return str(source_dir.relative_to(src.resolve()))


def static_check(src: Path, pyproject: dict[str, Any], version: str = SKBUILD_VERSION) -> None:
    """What can be refused before the build's environment is known (`source=PATH`, before
    the checkout is copied): build-system.requires, the table's own minimum-version, override
    conditions this reader does not follow, a cmake.source-dir no override moves."""
    where = str(src / "pyproject.toml")
    reqs = checked_requires(pyproject, version, where)
    tool = pyproject.get("tool", {})
    raw = tool.get("scikit-build") if isinstance(tool, dict) else None
    table = raw if isinstance(raw, dict) else {}
    checked_minimum(table.get("minimum-version"), reqs, version, where)
    overrides = table.get("overrides") or []
    apply_overrides(copy.deepcopy(table), {}, version, where)
    cmake = table.get("cmake", {})
    moved = any(isinstance(o, dict) and isinstance(o.get("cmake"), dict)
                and "source-dir" in o["cmake"] for o in overrides)
    if isinstance(cmake, dict) and not moved:  # no override can move the entry point
        checked_source_dir(src, cmake, raw is not None, where)


def read_skbuild(src: Path, pyproject: dict[str, Any], env: dict[str, str],
                 version: str = SKBUILD_VERSION) -> SkbuildConfig:
    """[tool.scikit-build] of a tree whose build backend is scikit_build_core.build, resolved
    for this environment as scikit-build-core `version` would; refusals are one line."""
    where = str(src / "pyproject.toml")
    reqs = checked_requires(pyproject, version, where)
    tool = pyproject.get("tool", {})
    raw = tool.get("scikit-build") if isinstance(tool, dict) else None
    table: dict[str, Any] = copy.deepcopy(raw) if isinstance(raw, dict) else {}
    matched = apply_overrides(table, env, version, where)
    minimum = checked_minimum(table.get("minimum-version"), reqs, version, where)
    cmake = table.get("cmake", {})
    if not isinstance(cmake, dict):
        raise UserError(f"{where}: [tool.scikit-build] cmake = {cmake!r} is not a table")
    subdir = checked_source_dir(src, cmake, raw is not None, where)
    raw_defines = cmake.get("define") or {}
    if not isinstance(raw_defines, dict):
        raise UserError(f"{where}: [tool.scikit-build] cmake.define = {raw_defines!r} is not a table")
    defines = {}
    for name, value in raw_defines.items():
        text = define_text(name, value, env, where)
        if text is not None:
            defines[name] = text
    args = cmake.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise UserError(f"{where}: [tool.scikit-build] cmake.args = {args!r} is not a list of strings")
    build_type = cmake.get("build-type", "Release")
    return SkbuildConfig(source_subdir=subdir,
                         defines=defines, args=list(args), table_build_type=str(build_type),
                         minimum_version=minimum, read_as=version, matched=matched)
