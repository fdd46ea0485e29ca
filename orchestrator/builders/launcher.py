"""The compile cache in front of every compiler: ccache (pinned in the lock, unpacked from
its Debian package) as CMAKE_<LANG>_COMPILER_LAUNCHER. Outside the derivation: it changes
how fast an object appears, never its bytes.

Hits across checkouts, variants' rebuilds and teammates come from path-free compile lines:
the builders' -ffile-prefix-map flags already make the *output* path-free, `base_dir` makes
ccache hash the remaining absolute paths (-I, the source) relative to the build directory,
and the prefix-map flags themselves are left out of the hash (`ignore_options`), because
they name the very paths that differ and are accounted for by the output being identical.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import UserError

LANGS = ("C", "CXX", "CUDA")


@dataclass(frozen=True)
class CompileCache:
    kind: str                 # "ccache" | "off"
    binary: Path | None       # the launcher program
    directory: Path | None    # local cache directory (under the store by default)
    remote: str | None = None  # ccache remote_storage URL (the team's WebDAV), secrets resolved

    @property
    def enabled(self) -> bool:
        return self.kind != "off" and self.binary is not None

    def cmake_defines(self) -> dict[str, str]:
        if not self.enabled:
            return {}
        return {f"CMAKE_{lang}_COMPILER_LAUNCHER": str(self.binary) for lang in LANGS}

    def env(self, base_dir: Path) -> dict[str, str]:
        """ccache's configuration for one build, all from the environment (no user config)."""
        if not self.enabled:
            return {}
        assert self.directory is not None
        env = {
            "CCACHE_DIR": str(self.directory),
            "CCACHE_CONFIGPATH": str(self.directory / "ccache.conf"),
            "CCACHE_BASEDIR": str(base_dir),
            "CCACHE_NOHASHDIR": "1",
            "CCACHE_IGNOREOPTIONS": "-ffile-prefix-map=* -fdebug-prefix-map=* -fmacro-prefix-map=*",
            "CCACHE_SLOPPINESS": "include_file_mtime,include_file_ctime,time_macros,locale",
            "CCACHE_COMPILERCHECK": "content",
            "CCACHE_MAXSIZE": "20G",
            "CCACHE_COMPRESS": "1",
        }
        if self.remote:
            env["CCACHE_REMOTE_STORAGE"] = self.remote
        return env


def ccache_binary(deb_root: Path) -> Path | None:
    p = deb_root / "usr" / "bin" / "ccache"
    return p if p.is_file() else None


def resolve(kind: str, deb_root: Path, directory: Path, remote: str | None) -> CompileCache:
    """The compile cache a build uses; ccache wanted but not in the lock is a clear error."""
    if kind == "off":
        return CompileCache("off", None, None)
    binary = ccache_binary(deb_root)
    if binary is None:
        raise UserError("compile_cache=ccache but the lock has no ccache; add \"ccache\" to [deb] "
                        "packages in the lock spec and run `doit lock`, or pass compile_cache=off")
    return CompileCache(kind, binary, directory, remote)
