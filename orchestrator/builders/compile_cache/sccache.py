"""The sccache of a store: its launcher script (sccache_compile.py in front of sccache), and
its server, started fresh for each build (its counters are the build's), asked for its stats,
stopped when the build ends."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
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


def stop_server(cc: CompileCache) -> None:
    run_sccache(cc, "--stop-server")


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
