"""distcc as the fan-out for compile-cache misses: host specs, reachability, the binary.

Hosts come from `distcc_hosts=` or cache.toml's [compile_cache] distcc-hosts, never from the
recipe: like the compile cache they change where an object is compiled, never its bytes
(ccache's prefix command is `distcc_compile`, which keeps `-g` objects byte-identical; the
remote runs the very compiler path of the compile line).
"""
from __future__ import annotations

import re
import shlex
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import UserError
from orchestrator.fs import write_atomic

DEFAULT_PORT = 3632
PREFIX_SCRIPT = "orch-distcc-compile"  # in DISTCC_DIR: ccache's prefix command
# HOST[:PORT][/LIMIT][,lzo]  (distcc(1) "HOST SPECIFICATIONS", the TCP forms) or localhost[/LIMIT]
HOST_RE = re.compile(r"^(?P<host>[A-Za-z0-9][A-Za-z0-9._-]*)(?::(?P<port>\d{1,5}))?"
                     r"(?:/(?P<limit>\d{1,4}))?(?P<opts>(?:,lzo)?)$")
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class DistccHost:
    spec: str          # as written, passed to DISTCC_HOSTS unchanged
    host: str
    port: int
    limit: int | None  # concurrent jobs on that host

    @property
    def local(self) -> bool:
        """distcc's `localhost` means "compile here", no daemon involved."""
        return self.host == "localhost"


def parse_hosts(specs: list[str], setting: str) -> list[DistccHost]:
    """Parse host specs; a bad one is a UserError naming the setting it came from."""
    hosts = []
    for spec in specs:
        m = HOST_RE.match(spec)
        port = int(m["port"]) if m and m["port"] else DEFAULT_PORT
        if m is None or not 0 < port < 65536 or (m["limit"] is not None and int(m["limit"]) < 1):
            raise UserError(f"{setting}: bad distcc host {spec!r}; use HOST[:PORT][/JOBS], "
                            f"e.g. buildbox1:3632/16")
        hosts.append(DistccHost(spec, m["host"], port, int(m["limit"]) if m["limit"] else None))
    return hosts


HOST_OPTIONS = ("lzo",)


def split_hosts(value: str) -> list[str]:
    """The `distcc_hosts=` variable: specs separated by spaces, commas or semicolons
    (`a/4,b/8` or DISTCC_HOSTS style `a/4 b/8`; a `,lzo` stays with its host); `off`, `0`,
    `none` or empty mean no distcc (also over cache.toml)."""
    v = value.strip()
    if v.lower() in ("", "off", "0", "none"):
        return []
    specs: list[str] = []
    for part in v.replace(";", " ").replace(",", " ,").split():
        if part.startswith(",") and part[1:] in HOST_OPTIONS and specs:
            specs[-1] += part
        elif part.lstrip(","):
            specs.append(part.lstrip(","))
    return specs


def reachable(host: DistccHost, timeout: float) -> str | None:
    """None when the daemon's port accepts a connection, else why not."""
    if host.local:
        return None
    try:
        socket.create_connection((host.host, host.port), timeout=timeout).close()
        return None
    except OSError as e:
        return e.strerror or str(e)


def distcc_binary() -> Path | None:
    found = shutil.which("distcc", path=SYSTEM_PATH)
    return Path(found) if found else None


def hosts_env(hosts: list[DistccHost]) -> str:
    return " ".join(h.spec for h in hosts)


def slots(hosts: list[DistccHost]) -> int:
    """Concurrent compiles the hosts take (distcc's default is 4 per host, 2 for localhost)."""
    return sum(h.limit or (2 if h.local else 4) for h in hosts)


def prefix_command(distcc_dir: Path, binary: Path) -> Path:
    """The script ccache runs misses through (CCACHE_PREFIX): distcc_compile.py with this
    interpreter and distcc (ccache takes a program, not a command line). Rewritten only when
    it changed."""
    program = Path(__file__).with_name("distcc_compile.py")
    text = (f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -I {shlex.quote(str(program))} "
            f"{shlex.quote(str(binary))} \"$@\"\n")
    script = distcc_dir / PREFIX_SCRIPT
    if not script.is_file() or script.read_text() != text:
        write_atomic(script, text, mode=0o755, durable=False)
    return script
