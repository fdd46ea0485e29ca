"""The compile cache in front of every compiler: ccache (pinned in the lock, unpacked from
its Debian package) as CMAKE_<LANG>_COMPILER_LAUNCHER, optionally with a remote storage on
the team's cache server and distcc for the misses. Outside the derivation: it changes how
fast an object appears, never its bytes.

Hits across checkouts, variants' rebuilds and teammates come from path-free compile lines:
the builders' -ffile-prefix-map flags already make the *output* path-free, `base_dir` (the
store root) makes ccache hash the remaining absolute paths (-I, the source) relative to the
build directory, the cmake builder reaches the source through a link inside the build tree
(`source_link`, so the relative path is the same for every checkout), and the prefix-map
flags themselves are left out of the hash (`ignore_options`), because they name the very
paths that differ and are accounted for by the output being identical.
"""
from __future__ import annotations

import http.client
import os
import socket
import subprocess
import urllib.parse
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from orchestrator import distcc
from orchestrator.cache.compile_config import CompileCacheConfig, load_compile_cache_config
from orchestrator.cache.config import Credentials
from orchestrator.console import console
from orchestrator.errors import UserError
from orchestrator.settings import Settings

LANGS = ("C", "CXX", "CUDA")
STATS_LOG = ".orch-ccache-stats.log"   # per build, in the build tree: this build's counters
SOURCE_LINK = ".orch-src"             # <build tree>/.orch-src -> the checkout (cmake builder)
DISTCC_VAR = "distcc_hosts"


@dataclass(frozen=True)
class CompileCache:
    kind: str                 # "ccache" | "off"
    binary: Path | None       # the launcher program
    directory: Path | None    # local cache directory (under the store by default)
    remote: str | None = None  # ccache remote_storage URL (the team's WebDAV), secrets resolved
    max_size: str = "20G"
    distcc: Path | None = None  # ccache's prefix_command for misses
    distcc_hosts: str = ""      # DISTCC_HOSTS, reachable hosts only

    @property
    def enabled(self) -> bool:
        return self.kind != "off" and self.binary is not None

    def cmake_defines(self) -> dict[str, str]:
        if not self.enabled:
            return {}
        return {f"CMAKE_{lang}_COMPILER_LAUNCHER": str(self.binary) for lang in LANGS}

    def env(self, base_dir: Path, stats_log: Path | None = None) -> dict[str, str]:
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


# --- settings: cache.toml's [compile_cache] and the distcc_hosts= variable ---

@dataclass(frozen=True)
class LauncherSettings:
    config: CompileCacheConfig
    hosts: list[distcc.DistccHost]
    hosts_from: str  # the setting the hosts came from, for messages


def launcher_settings(settings: Settings) -> LauncherSettings:
    """Parse and check the launcher's settings without touching the network; a bad one is
    a UserError (exit 2) naming it, raised before anything is built or written."""
    config, where = load_compile_cache_config(settings.repo_root)
    if DISTCC_VAR in settings.vars:
        specs, source = distcc.split_hosts(settings.vars[DISTCC_VAR]), DISTCC_VAR
    else:
        specs, source = config.distcc_hosts, f"{where}.distcc-hosts"
    return LauncherSettings(config, distcc.parse_hosts(specs, source), source)


def for_build(settings: Settings, kind: str, deb_root: Path, directory: Path) -> CompileCache:
    """The compile cache of one build: settings checked, the remote and the distcc hosts
    probed. An unreachable one costs one warning line and is left out, never the build."""
    ls = launcher_settings(settings)
    cc = resolve(kind, deb_root, directory, None)
    if not cc.enabled:
        return cc
    cc = replace(cc, max_size=ls.config.max_size)
    if ls.config.remote:
        why = probe_remote(ls.config.remote, ls.config.timeout)
        if why is None:
            cc = replace(cc, remote=remote_storage(ls.config.remote, Credentials.from_env(),
                                                   ls.config.timeout))
        else:
            console.print(f"[yellow]warning:[/] compile cache remote {redact(ls.config.remote)} "
                          f"unreachable ({why}); using the local compile cache only")
    if ls.hosts:
        cc = with_distcc(cc, ls, ls.config.timeout)
    return cc


def with_distcc(cc: CompileCache, ls: LauncherSettings, timeout: float) -> CompileCache:
    binary = distcc.distcc_binary()
    if binary is None:
        console.print(f"[yellow]warning:[/] {ls.hosts_from} names distcc hosts but distcc is "
                      f"not installed (apt-get install distcc); compiling locally")
        return cc
    down = {h.spec: why for h in ls.hosts if (why := distcc.reachable(h, timeout)) is not None}
    up = [h for h in ls.hosts if h.spec not in down]
    if down:
        rest = "compiling the misses locally" if not up else \
            f"using {distcc.hosts_env(up)}"
        console.print(f"[yellow]warning:[/] distcc host(s) unreachable: "
                      f"{', '.join(f'{s} ({w})' for s, w in down.items())}; {rest}")
    if not up:
        return cc
    assert cc.directory is not None
    (cc.directory / "distcc").mkdir(parents=True, exist_ok=True)  # DISTCC_DIR must exist
    return replace(cc, distcc=binary, distcc_hosts=distcc.hosts_env(up))


def redact(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        return urllib.parse.urlunsplit(parts._replace(netloc=f"***@{host}"))
    return url


def probe_remote(url: str, timeout: float) -> str | None:
    """None when the remote answers (any HTTP status will do; the server decides per
    request), else why not."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "file":
        path = Path(parts.path)
        return None if path.is_dir() or path.parent.is_dir() else f"no directory {path}"
    try:
        if parts.scheme in ("http", "https"):
            conn_cls = http.client.HTTPSConnection if parts.scheme == "https" \
                else http.client.HTTPConnection
            conn = conn_cls(parts.hostname or "", parts.port, timeout=timeout)
            try:
                conn.request("HEAD", parts.path or "/")
                conn.getresponse().read()
            finally:
                conn.close()
        else:  # redis://
            socket.create_connection((parts.hostname or "", parts.port or 6379),
                                     timeout=timeout).close()
    except (OSError, http.client.HTTPException) as e:
        return getattr(e, "strerror", None) or str(e) or type(e).__name__
    return None


def remote_storage(url: str, creds: Credentials, timeout: float) -> str:
    """ccache's remote_storage line: the URL with the artifact cache's credentials (basic
    auth in the URL, or bearer-token=), read-only without them, and the connect timeout."""
    attrs = [f"connect-timeout={int(timeout * 1000)}"]
    if url.startswith(("http://", "https://")):
        if creds.token:
            attrs.append(f"bearer-token={creds.token}")
        elif creds.user and creds.password:
            parts = urllib.parse.urlsplit(url)
            user = urllib.parse.quote(creds.user, safe="")
            password = urllib.parse.quote(creds.password, safe="")
            url = urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:{password}@{parts.netloc}"))
    if not creds.present():
        attrs.append("read-only=true")
    return "|".join([url, *attrs])


# --- the path-free source (cmake builder) ---

def source_link(build_dir: Path, source_dir: Path) -> Path:
    """<build tree>/.orch-src -> the checkout: the compile lines then name the source by a
    path that is the same for every checkout, relative to the build tree (base_dir)."""
    link = build_dir / SOURCE_LINK
    build_dir.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() and os.readlink(link) == str(source_dir):
        return link
    tmp = build_dir / f"{SOURCE_LINK}.tmp-{os.getpid()}"
    if tmp.is_symlink():
        tmp.unlink()
    os.symlink(source_dir, tmp)
    os.replace(tmp, link)
    return link


def source_link_flags(link: Path, logical_source: str) -> list[str]:
    """Map the link (absolute, and as ccache's base_dir rewrite leaves it, relative) to the
    source's logical root, after the build tree's map: GCC applies the last matching map."""
    return [f"-ffile-prefix-map={link}={logical_source}",
            f"-ffile-prefix-map={SOURCE_LINK}={logical_source}"]


# --- statistics: per build (the stats log), and the whole local cache ---

@dataclass(frozen=True)
class BuildStats:
    counters: dict[str, int]

    @property
    def remote_hits(self) -> int:
        return self.counters.get("remote_storage_hit", 0)

    @property
    def hits(self) -> int:
        return self.counters.get("direct_cache_hit", 0) + self.counters.get("preprocessed_cache_hit", 0)

    @property
    def misses(self) -> int:
        return self.counters.get("cache_miss", 0)

    @property
    def uncacheable(self) -> int:
        skip = {"direct_cache_hit", "preprocessed_cache_hit", "cache_miss", "direct_cache_miss",
                "preprocessed_cache_miss", "local_storage_hit", "local_storage_miss",
                "local_storage_read_hit", "local_storage_read_miss", "local_storage_write",
                "remote_storage_hit", "remote_storage_miss", "remote_storage_read_hit",
                "remote_storage_read_miss", "remote_storage_write", "remote_storage_error",
                "remote_storage_timeout", "recache"}
        return sum(n for k, n in self.counters.items() if k not in skip)

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    def to_json(self) -> dict[str, int | float]:
        return {"hits": self.hits, "local_hits": self.hits - self.remote_hits,
                "remote_hits": self.remote_hits, "misses": self.misses,
                "uncacheable": self.uncacheable, "hit_rate": round(self.hit_rate, 4)}

    def line(self, cc: CompileCache) -> str:
        extra = []
        if self.remote_hits:
            extra.append(f"{self.remote_hits} from the remote")
        if self.uncacheable:
            extra.append(f"{self.uncacheable} uncacheable")
        if cc.distcc_hosts:
            extra.append(f"misses on distcc {cc.distcc_hosts}")
        tail = f" ({'; '.join(extra)})" if extra else ""
        return (f"compile cache: {self.hits} hit(s), {self.misses} miss(es), "
                f"{self.hit_rate:.0%} hit rate{tail}")


def begin_stats(build_dir: Path) -> Path:
    """A fresh stats log for this build in its build tree."""
    build_dir.mkdir(parents=True, exist_ok=True)
    log = build_dir / STATS_LOG
    log.unlink(missing_ok=True)
    return log


def read_stats(log: Path) -> BuildStats:
    """Counters of the compiles this build ran (ccache appends one block per compile:
    a `# <input>` line, then the counter names)."""
    counts: Counter[str] = Counter()
    if log.is_file():
        for line in log.read_text(errors="replace").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                counts[line] += 1
    return BuildStats(dict(counts))


def report_build(cc: CompileCache, build_dir: Path) -> BuildStats | None:
    """Print this build's hits and misses (the build summary's compile-cache line)."""
    if not cc.enabled:
        return None
    stats = read_stats(build_dir / STATS_LOG)
    console.print(stats.line(cc))
    return stats


def local_usage(directory: Path) -> tuple[int, int]:
    """(bytes, files) of a local compile cache directory (ccache's own files included)."""
    size = files = 0
    for dirpath, _, names in os.walk(directory):
        for n in names:
            try:
                size += os.lstat(os.path.join(dirpath, n)).st_size
                files += 1
            except OSError:
                pass
    return size, files


def find_ccache(store_root: Path) -> Path | None:
    """A ccache binary from one of the store's toolchains (for status and gc)."""
    tcs = store_root / "toolchains"
    for tc in sorted(tcs.iterdir()) if tcs.is_dir() else []:
        if (b := ccache_binary(tc / "debs" / "root")) is not None:
            return b
    return None


def trim_request(variables: dict[str, str]) -> tuple[str | None, str | None]:
    """`doit gc ccache_max=5G ccache_evict_older=7d`: the checked values (UserError naming the
    variable otherwise), or None where not asked."""
    max_size, older = variables.get("ccache_max"), variables.get("ccache_evict_older")
    if max_size is not None:
        try:
            CompileCacheConfig(max_size=max_size)
        except ValueError:
            raise UserError(f"ccache_max={max_size!r}: use a size such as 5G or 500M") from None
    if older is not None and not (older[:-1].isdigit() and older[-1:] in ("s", "d")):
        raise UserError(f"ccache_evict_older={older!r}: use an age such as 7d or 3600s")
    return max_size, older


def trim(store_root: Path, max_size: str | None, older_than: str | None) -> str:
    """Trim the store's compile cache (LRU down to max_size; entries unused for older_than);
    returns the size line."""
    directory = store_root / "ccache"
    if directory.is_dir() and (max_size or older_than):
        binary = find_ccache(store_root)
        if binary is None:
            raise UserError(f"no ccache in any toolchain of {store_root}; run `doit toolchain`")
        env = {**os.environ, "CCACHE_DIR": str(directory),
               "CCACHE_CONFIGPATH": str(directory / "ccache.conf")}
        if older_than is not None:
            subprocess.run([binary, "--evict-older-than", older_than], env=env, check=True,
                           capture_output=True)
        if max_size is not None:
            subprocess.run([binary, "--cleanup"], env={**env, "CCACHE_MAXSIZE": max_size},
                           check=True, capture_output=True)
    size, files = local_usage(directory)
    return f"compile cache: {size / 1e6:.1f} MB in {files} files ({directory})"
