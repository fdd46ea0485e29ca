"""The PEP 517 wheel build the setuptools and pep517 builders share: the locked backend, no
isolation, no index, then the wheel unpacked into the artifact's prefix.

The source is copied into `<build dir>/src` first (backends write build/ and *.egg-info next
to pyproject.toml; the checkout is never modified), pip builds the wheel with
`--no-build-isolation --no-deps --no-index`, the wheel's contents land in prefix/python
(scripts in prefix/bin, headers in prefix/include, data in prefix/). The backend's own
requirements must be locked and listed in build.uses, so they are part of the artifact id.
Nothing is downloaded at build time: pip has no index and the proxies point nowhere.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import stat
import tomllib
import zipfile
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from orchestrator.builders.context import BuildContext
from orchestrator.builders.process import BuildFailed, run_logged
from orchestrator.errors import UserError
from orchestrator.fs import remove_tree
from orchestrator.model.lock import PypiEntry

SETUPTOOLS_BACKENDS = ("setuptools.build_meta", "setuptools.build_meta:__legacy__")
# PEP 517's fallback for a project without [build-system].
LEGACY = {"build-backend": "setuptools.build_meta:__legacy__", "requires": ["setuptools>=40.8.0"]}
NOWHERE = "http://127.0.0.1:9"  # discard port: any download attempt is refused at once
# What a backend prints when a build tried to reach the network (then bad input, not a bug).
DOWNLOAD_SIGNS = ("No matching distribution found for", "Could not find a version that satisfies",
                  "Connection refused", "ProxyError", "fetch_build_eggs", "Network is unreachable")
COPY_IGNORED = (".git", ".hg", "__pycache__", ".orch", ".vscode", "build", "dist")


def where(ctx: BuildContext) -> str:
    return f"recipes/{ctx.plan.recipe.name}.toml"


def read_build_system(ctx: BuildContext, src: Path) -> dict:
    """[build-system] of src/pyproject.toml; the legacy setuptools one without a pyproject."""
    py = src / "pyproject.toml"
    if not py.is_file():
        if (src / "setup.py").is_file():
            return LEGACY
        raise UserError(f"{where(ctx)}: build.system = {ctx.plan.recipe.build.system!r} but the "
                        f"source has neither pyproject.toml nor setup.py; fix source.path/subdir")
    try:
        data = tomllib.loads(py.read_text())
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{where(ctx)}: the source's pyproject.toml is not valid TOML ({e}); fix it") from None
    bs = data.get("build-system") or {}
    return {"build-backend": bs.get("build-backend", LEGACY["build-backend"]),
            "requires": bs.get("requires", LEGACY["requires"])}


def check_requirements(ctx: BuildContext, requires: list[str]) -> None:
    """Every build requirement is locked (right version) and listed in build.uses."""
    lock_name = ctx.plan.recipe.lock
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            raise UserError(f"{where(ctx)}: the source's pyproject.toml [build-system] requires "
                            f"{text!r}, which is not a valid requirement; fix the project") from None
        if req.marker is not None and not req.marker.evaluate():
            continue
        key = f"pypi:{canonicalize_name(req.name)}"
        entry = ctx.plan.lock.entries.get(key)
        if not isinstance(entry, PypiEntry):
            raise UserError(f"{where(ctx)}: build requirement {text!r} (the source's [build-system] "
                            f"requires) is not in locks/{lock_name}.lock.json; add it to "
                            f"locks/{lock_name}.toml [pypi], run `doit lock` and list {key} in build.uses")
        if req.specifier and not req.specifier.contains(entry.version, prereleases=True):
            raise UserError(f"{where(ctx)}: build requirement {text!r} does not match the locked "
                            f"{entry.name} {entry.version}; pin a matching version in "
                            f"locks/{lock_name}.toml and run `doit lock`")
        if key not in ctx.plan.inputs:
            raise UserError(f"{where(ctx)}: build.uses lacks {key!r}, a build requirement of the "
                            "source; add it to build.uses so it is part of the artifact id")


def copy_source(ctx: BuildContext) -> BuildContext:
    """The source, mirrored at <build dir>/src (a changed file copied with its mtime, a file
    gone removed; the ignored names, e.g. setuptools' build/, kept as the last build left
    them: an incremental build); the context that builds from it (builders return the original
    context: the manifest's prefix map names the source)."""
    dest = ctx.build_dir / "src"
    ctx.build_dir.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns(*COPY_IGNORED)
    _mirror(ctx.source_dir, dest, ignore)
    return dataclasses.replace(ctx, source_dir=dest)


def _mirror(src: Path, dest: Path, ignore) -> None:  # type: ignore[no-untyped-def]
    names = os.listdir(src)
    wanted = set(names) - set(ignore(str(src), names))
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        dest.unlink()
    dest.mkdir(exist_ok=True)
    dest.chmod(dest.stat().st_mode | stat.S_IWUSR)  # sources under the store may be read-only
    for name in set(os.listdir(dest)) - wanted - set(ignore(str(dest), os.listdir(dest))):
        remove_tree(dest / name)
    for name in sorted(wanted):
        s, d = src / name, dest / name
        if s.is_symlink():
            if not d.is_symlink() or os.readlink(d) != os.readlink(s):
                remove_tree(d)
                os.symlink(os.readlink(s), d)
        elif s.is_dir():
            _mirror(s, d, ignore)
        else:
            st = s.stat()
            try:
                dt = d.lstat()
                same = (dt.st_size, dt.st_mtime_ns) == (st.st_size, st.st_mtime_ns) \
                    and stat.S_ISREG(dt.st_mode)
            except OSError:
                same = False
            if not same:
                remove_tree(d)
                shutil.copy2(s, d)
                d.chmod(d.stat().st_mode | stat.S_IWUSR)


def copy_prefix_map_flags(ctx: BuildContext, built: BuildContext) -> list[str]:
    """The build tree's map, then the copy's (GCC applies the last matching map): debug info
    names the copy's files under the source's logical root, as if built in place."""
    return [f"-ffile-prefix-map={ctx.build_dir}={ctx.logical_build}",
            f"-ffile-prefix-map={built.source_dir}={ctx.logical_source}"]


def offline_env(ctx: BuildContext) -> dict[str, str]:
    """The build's environment with every way to download closed."""
    env = {k: v for k, v in ctx.env.items() if not k.startswith("PIP_")}
    env.update({"PIP_NO_INDEX": "1", "PIP_CONFIG_FILE": os.devnull, "PIP_NO_CACHE_DIR": "1",
                "PIP_DISABLE_PIP_VERSION_CHECK": "1", "MAX_JOBS": str(ctx.jobs),
                "CMAKE_BUILD_PARALLEL_LEVEL": str(ctx.jobs),
                "http_proxy": NOWHERE, "https_proxy": NOWHERE,
                "HTTP_PROXY": NOWHERE, "HTTPS_PROXY": NOWHERE, "no_proxy": "", "NO_PROXY": ""})
    return env


def build_wheel(ctx: BuildContext, env: dict[str, str], config: list[str]) -> Path:
    """pip wheel of ctx.source_dir into <build dir>/dist; the one wheel it made."""
    dist = ctx.build_dir / "dist"
    if dist.exists():
        shutil.rmtree(dist)
    dist.mkdir(parents=True)
    cmd: list[str | Path] = [ctx.toolchain.python, "-m", "pip", "wheel", "-v", "--no-build-isolation",
                             "--no-deps", "--no-index", "--wheel-dir", dist,
                             *(f"--config-settings={c}" for c in config), ctx.source_dir]
    try:
        run_logged(cmd, env=env, log=ctx.log, title="wheel", cwd=ctx.source_dir)
    except BuildFailed as e:
        text = ctx.log.read_text(errors="replace")
        sign = next((s for s in DOWNLOAD_SIGNS if s in text), None)
        if sign is not None:
            raise UserError(f"{where(ctx)}: the source's build tried to download at build time "
                            f"({sign!r} in {ctx.log.name}); lock what it needs in "
                            f"locks/{ctx.plan.recipe.lock}.toml [pypi], run `doit lock` and add it "
                            "to build.uses") from None
        raise e
    wheels = sorted(dist.glob("*.whl"))
    if len(wheels) != 1:
        raise BuildFailed(f"wheel: expected one wheel in {dist}, found {len(wheels)}; full log: {ctx.log}")
    return wheels[0]


SCHEME_DIRS = {"purelib": "python", "platlib": "python", "scripts": "bin",
               "headers": "include", "data": "."}


def unpack_wheel(wheel: Path, prefix: Path) -> list[str]:
    """Install the wheel's files into prefix (no pip: a plain, deterministic unpack)."""
    written = []
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            parts = info.filename.split("/")
            if any(p in ("", "..") for p in parts) or info.filename.startswith("/"):
                raise BuildFailed(f"wheel {wheel.name} has an unsafe path {info.filename!r}")
            if parts[0].endswith(".data") and len(parts) > 2:
                rel = Path(SCHEME_DIRS.get(parts[1], parts[1]), *parts[2:])
            else:
                rel = Path("python", *parts)
            dest = prefix / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out)
            mode = (info.external_attr >> 16) & 0o777
            dest.chmod(0o755 if mode & 0o111 or rel.parts[0] == "bin" else 0o644)
            written.append(rel.as_posix())
    return written


def flags_env(flags: list[str]) -> dict[str, str]:
    text = " ".join(flags)
    return {"CFLAGS": text, "CXXFLAGS": text}
