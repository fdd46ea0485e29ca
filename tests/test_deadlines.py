"""Overall deadlines: a server on 127.0.0.1 that drips one byte a second never trips the
per-read socket timeout, yet every operation ends at its deadline with one clear error.

The server is bounded (it stops after DRIP_MAX bytes), so a missing deadline shows as a
different error (or success), never as a hang. No timing is asserted: the proof is the
error's cause.
"""
from __future__ import annotations

import hashlib
import http.server
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard

from orchestrator.cache.backend import blob_key, record_key
from orchestrator.cache.backends import open_backend
from orchestrator.cache.blob_download import download_blobs
from orchestrator.cache.cache_toml import CacheConfig
from orchestrator.cache.errors import CacheError
from orchestrator.cache.transfer import TransferStats

REPO = Path(__file__).resolve().parents[1]
DRIP_MAX = 30          # bytes; the server gives up after that many seconds of dripping
TIMEOUT = 2.0          # cache.toml timeout: socket reads wait 2 s, a byte comes every 1 s


class _Dripping(http.server.BaseHTTPRequestHandler):
    """Answers every GET with a large body (or its headers) one byte per second."""
    protocol_version = "HTTP/1.1"
    stop: threading.Event
    drip_headers = False

    def _drip(self, data: bytes) -> None:
        for i in range(min(len(data), DRIP_MAX)):
            if self.stop.wait(1.0):
                return
            try:
                self.wfile.write(data[i:i + 1])
                self.wfile.flush()
            except OSError:
                return

    def do_GET(self) -> None:  # noqa: N802
        body = zstandard.ZstdCompressor().compress(b"x" * 100) if "/cas/" in self.path \
            else b'{"record": "' + b"r" * 200 + b'"}'
        head = (f"HTTP/1.1 200 OK\r\nContent-Length: {len(body) + 1000}\r\n\r\n").encode()
        if self.drip_headers:
            self._drip(head)
            return
        self.wfile.write(head)
        self.wfile.flush()
        self._drip(body + b" " * 1000)

    def do_HEAD(self) -> None:  # noqa: N802
        self._drip(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(params=["body", "headers"])
def slow_url(request: pytest.FixtureRequest) -> Iterator[str]:
    stop = threading.Event()
    handler = type("H", (_Dripping,), {"stop": stop, "drip_headers": request.param == "headers"})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/c/"
    stop.set()
    srv.shutdown()
    srv.server_close()


CFG = CacheConfig(jobs=2, timeout=TIMEOUT)


def test_record_get_has_a_deadline(slow_url: str) -> None:
    b = open_backend(slow_url, CFG)
    try:
        with pytest.raises(CacheError, match="overall deadline"):
            b.get(record_key("0" * 40))
    finally:
        b.close()


def test_head_has_a_deadline(slow_url: str) -> None:
    b = open_backend(slow_url, CFG)
    try:
        with pytest.raises(CacheError, match="overall deadline"):
            b.exists(blob_key("0" * 64))
    finally:
        b.close()


def test_blob_download_has_a_deadline(slow_url: str, tmp_path: Path) -> None:
    sha = hashlib.sha256(b"x" * 100).hexdigest()
    b = open_backend(slow_url, CFG)
    try:
        with pytest.raises(CacheError, match="overall deadline") as err:
            download_blobs(b, [(sha, 100, tmp_path / "blob")], 2, "pull", TransferStats())
        assert "cut short" not in str(err.value)  # a deadline is not retried as a cut stream
    finally:
        b.close()


def test_doit_pull_stops_at_the_deadline(slow_url: str, tmp_path: Path) -> None:
    cfg = tmp_path / "cache.toml"
    cfg.write_text(f'[cache]\nsubstituters = ["{slow_url}"]\ntimeout = {TIMEOUT}\n')
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ORCH_")},
           "ORCH_CACHE_CONFIG": str(cfg), "ORCH_NO_PROGRESS": "1"}
    p = subprocess.run([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), "pull",
                        f"store={tmp_path / 'store'}", f"id={'0' * 40}"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=DRIP_MAX * 4)
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "overall deadline" in lines[0], p.stderr


def test_free_port_is_refused_not_hung() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    b = open_backend(f"http://127.0.0.1:{port}/c/", CFG)
    try:
        with pytest.raises(CacheError, match="down or unreachable"):
            b.get(record_key("0" * 40))
    finally:
        b.close()
