"""What one build calls: the launcher's settings checked (before anything is built), the
compile cache resolved and probed, and the build's begin / report / end hooks."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from orchestrator.builders.compile_cache import distcc, sccache
from orchestrator.builders.compile_cache.kind import CompileCache, resolve
from orchestrator.builders.compile_cache.stats import STATS_LOG, BuildStats, read_stats
from orchestrator.cache.compile_config import CompileCacheConfig, load_compile_cache_config
from orchestrator.config.settings import Settings
from orchestrator.console import console
from orchestrator.memo import head_start

DISTCC_VAR = "distcc_hosts"


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
    # here: http.client and cache.toml's secrets cost every start (a no-op build, a switch)
    from orchestrator.builders.compile_cache.remote import ccache_remote, sccache_remote

    ls = launcher_settings(settings)
    cc = resolve(kind, deb_root, directory, None, venv)
    if not cc.enabled:
        return cc
    cc = replace(cc, max_size=ls.config.max_size)
    if cc.kind == "sccache":
        cc = replace(cc, sccache_launcher=sccache.launcher_script(cc))
        if ls.config.remote:
            cc = sccache_remote(cc, ls.config.remote, ls.config.timeout)
        if ls.hosts:
            console.print(f"[yellow]warning:[/] {ls.hosts_from}: distcc is wired for "
                          "compile_cache=ccache only; compiling locally")
        return cc
    if ls.config.remote:
        cc = ccache_remote(cc, ls.config.remote, ls.config.timeout)
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
    distcc_dir = cc.directory / "distcc"
    distcc_dir.mkdir(parents=True, exist_ok=True)  # DISTCC_DIR must exist
    return replace(cc, distcc=distcc.prefix_command(distcc_dir, binary),
                   distcc_hosts=distcc.hosts_env(up))


# --- one build's hooks ---

def begin_stats(build_dir: Path) -> Path:
    """A fresh stats log for this build in its build tree (a head start running there began
    it already: its compiles are this build's)."""
    build_dir.mkdir(parents=True, exist_ok=True)
    log = build_dir / STATS_LOG
    if not head_start.running_in(build_dir):
        log.unlink(missing_ok=True)
    return log


def begin_build(cc: CompileCache, env: dict[str, str]) -> None:
    """sccache: a fresh server for this build (its counters are this build's); ccache needs
    nothing (its stats log is per build)."""
    if cc.kind == "sccache":
        sccache.start_server(cc, env)


def report_build(cc: CompileCache, build_dir: Path) -> BuildStats | None:
    """Print this build's hits and misses (the build summary's compile-cache line)."""
    if not cc.enabled:
        return None
    stats = sccache.sccache_stats(cc) if cc.kind == "sccache" else read_stats(build_dir / STATS_LOG)
    console.print(stats.line(cc))
    return stats


def end_build(cc: CompileCache) -> None:
    """sccache: stop this store's server, so no process outlives the build."""
    if cc.kind == "sccache":
        sccache.stop_server(cc)
