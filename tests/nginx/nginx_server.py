"""Start a real nginx (WebDAV PUT) on a free 127.0.0.1 port from tests/nginx/nginx.conf.

Used by tests/test_cache_*.py and benchmarks/cache_pull.py. Runs as root or unprivileged:
everything (pid, logs, temp dirs, docroot) lives under a prefix dir the caller owns.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

CONF = Path(__file__).with_name("nginx.conf")
USER = "pusher"
PASSWORD = "s3cret-for-tests"
TOKEN = "test-token-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.path.exists(p)),
                                         None)


@dataclass
class AccessEntry:
    method: str
    uri: str
    status: int
    body_bytes_sent: int
    request_length: int


@dataclass
class NginxServer:
    prefix: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None

    @property
    def root(self) -> Path:
        return self.prefix / "www"

    def url(self, area: str = "cache") -> str:
        return f"http://127.0.0.1:{self.port}/{area}/"

    def start(self) -> NginxServer:
        binary = nginx_binary()
        if binary is None:
            raise RuntimeError("nginx is not installed (apt-get install nginx-light)")
        for d in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi", "www/cache", "www/token",
                  "www/open"):
            (self.prefix / d).mkdir(parents=True, exist_ok=True)
        (self.prefix / "htpasswd").write_text(f"{USER}:{{PLAIN}}{PASSWORD}\n")
        conf = CONF.read_text()
        for k, v in {"@PREFIX@": str(self.prefix), "@ROOT@": str(self.root),
                     "@PORT@": str(self.port), "@TOKEN@": TOKEN,
                     "@USER@": "user root root;" if os.geteuid() == 0 else ""}.items():
            conf = conf.replace(k, v)
        (self.prefix / "nginx.conf").write_text(conf)
        self.proc = subprocess.Popen([binary, "-p", str(self.prefix), "-c",
                                      str(self.prefix / "nginx.conf"), "-e", "stderr"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise RuntimeError(f"nginx exited: {err.strip()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("nginx did not start listening within 10s")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc and self.proc.stderr:
            self.proc.stderr.close()
        self.proc = None

    def access_log(self) -> list[AccessEntry]:
        path = self.prefix / "access.log"
        if not path.exists():
            return []
        out = []
        for line in path.read_text().splitlines():
            m, uri, status, sent, length = line.split(" ")
            out.append(AccessEntry(m, uri, int(status), int(sent), int(length)))
        return out

    def mark(self) -> int:
        """Current number of access-log lines, to count only what follows."""
        return len(self.access_log())
