"""The sccache of a store: its launcher script (sccache_compile.py in front of sccache), and
its server, started fresh for each build (its counters are the build's), asked for its stats,
stopped when the build ends."""
from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from orchestrator.builders.compile_cache.kind import CompileCache
from orchestrator.builders.compile_cache.stats import BuildStats
from orchestrator.errors import UserError
from orchestrator.fs import write_atomic

OWN_DIR = "orch"  # <store>/sccache/orch: our launcher script and compiler stand-ins (kept by gc)
LAUNCHER_SCRIPT = "orch-sccache"


def run_sccache(cc: CompileCache, *args: str,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    assert cc.binary is not None
    return subprocess.run([str(cc.binary), *args],
                          env={**os.environ, **(env or cc.sccache_client_env())},
                          capture_output=True, text=True, timeout=120)


def start_server(cc: CompileCache, env: dict[str, str]) -> None:
    """A fresh server, started with the build's environment (the server, not the client,
    reads SCCACHE_BASEDIRS and the remote)."""
    assert cc.directory is not None
    cc.directory.mkdir(parents=True, exist_ok=True)
    run_sccache(cc, "--stop-server")  # one left by a killed build; "not running" is fine
    r = run_sccache(cc, "--start-server", env=env)
    if r.returncode != 0:
        why = (r.stderr.strip().splitlines() or ["?"])[-1]
        raise UserError(f"compile_cache=sccache: the sccache server did not start ({why}); "
                        f"see {cc.directory / 'error.log'}, or pass compile_cache=ccache")


SERVER_EXIT_S = 10.0  # after --stop-server is acknowledged; then SIGTERM, then SIGKILL


def server_pids(cc: CompileCache) -> list[int]:
    """Live processes of this store's server: the sccache binary running with this store's
    SCCACHE_DIR (another store's server, or a zombie, is not ours)."""
    assert cc.binary is not None and cc.directory is not None
    exe, mark = os.path.realpath(cc.binary), f"SCCACHE_DIR={cc.directory}".encode()
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if os.readlink(d / "exe") == exe and mark in (d / "environ").read_bytes().split(b"\0"):
                pids.append(int(d.name))
        except OSError:
            pass
    return pids


def stop_server(cc: CompileCache) -> None:
    """Ask the server to stop, then wait for its process to end: --stop-server returns on the
    server's acknowledgement, and a busy machine lets the process live on a while. One that
    is still there after SERVER_EXIT_S gets SIGTERM, then SIGKILL, so nothing outlives the
    build (a client started during the build could also have started a second server)."""
    run_sccache(cc, "--stop-server")
    for sig, wait_s in ((signal.SIGTERM, SERVER_EXIT_S), (signal.SIGKILL, 2.0), (None, 2.0)):
        deadline = time.monotonic() + wait_s
        while (pids := server_pids(cc)) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not pids or sig is None:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass


def sccache_stats(cc: CompileCache) -> BuildStats:
    """This build's counters from its server (`--show-stats --stats-format=json`), in
    ccache's counter names so the summary line is the same."""
    r = run_sccache(cc, "--show-stats", "--stats-format=json")
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


def launcher_script(cc: CompileCache) -> Path:
    """<store>/sccache/orch/orch-sccache: sccache_compile.py with this interpreter, sccache
    and the stand-ins' directory (CMake's launcher is a program, not a command line).
    Rewritten only when it changed."""
    assert cc.directory is not None and cc.binary is not None
    own = cc.directory / OWN_DIR
    program = Path(__file__).with_name("sccache_compile.py")
    words = [sys.executable, "-I", str(program), str(cc.binary), str(own / "shims")]
    text = f"#!/bin/sh\nexec {' '.join(map(shlex.quote, words))} \"$@\"\n"
    script = own / LAUNCHER_SCRIPT
    own.mkdir(parents=True, exist_ok=True)
    if not script.is_file() or script.read_text() != text:
        write_atomic(script, text, mode=0o755, durable=False)
    return script
