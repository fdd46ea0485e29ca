"""A real CNCF distribution registry (Debian's `docker-registry`) on a free 127.0.0.1 port,
optionally behind token auth served by a tiny real token server (JWTs signed RS256 with a
throwaway certificate made by the openssl CLI, as `auth: token:` in distribution 2.8 wants).

Used by tests/test_cache_oci*.py, tests/test_hostile_records.py and benchmarks/cache_pull.py.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

USER = "pusher"
PASSWORD = "s3cret-for-registry-tests"
SERVICE = "orch-test-registry"
ISSUER = "orch-test-issuer"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def registry_binary() -> str:
    binary = shutil.which("docker-registry") or "/usr/bin/docker-registry"
    if not os.path.exists(binary):
        raise RuntimeError("docker-registry is not installed (apt-get install docker-registry)")
    return binary


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenIssuer:
    """Signs registry tokens: `USER:PASSWORD` gets the actions it asks for, anyone else pull."""

    def __init__(self, workdir: Path) -> None:
        self.key, self.cert = workdir / "token.key", workdir / "token.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                        str(self.key), "-out", str(self.cert), "-days", "2", "-subj",
                        "/CN=orch-test-token"], check=True, capture_output=True)
        pem = self.cert.read_text()
        self.der_b64 = "".join(pem.split("-----")[2].split())
        self.issued: list[str] = []   # the scopes asked for, in order

    def token(self, scope: str, authenticated: bool) -> str:
        access = []
        if scope:
            kind, name, actions = scope.split(":")
            granted = actions.split(",") if authenticated else \
                [a for a in actions.split(",") if a == "pull"]
            access.append({"type": kind, "name": name, "actions": granted})
        now = int(time.time())
        header = {"typ": "JWT", "alg": "RS256", "x5c": [self.der_b64]}
        claims = {"iss": ISSUER, "sub": USER if authenticated else "", "aud": SERVICE,
                  "exp": now + 300, "nbf": now - 10, "iat": now, "jti": os.urandom(8).hex(),
                  "access": access}
        signing_input = f"{_b64url(json.dumps(header).encode())}." \
                        f"{_b64url(json.dumps(claims).encode())}"
        sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(self.key)],
                             input=signing_input.encode(), check=True, capture_output=True).stdout
        self.issued.append(scope)
        return f"{signing_input}.{_b64url(sig)}"


def _token_handler(issuer: TokenIssuer) -> type[BaseHTTPRequestHandler]:
    basic = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            given = self.headers.get("Authorization")
            if given is not None and given != basic:
                self.send_response(401)
                self.end_headers()
                return
            body = json.dumps({"token": issuer.token(query.get("scope", [""])[0],
                                                     given == basic)}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass
    return Handler


@dataclass
class RegistryServer:
    workdir: Path
    token_auth: bool = False
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None
    issuer: TokenIssuer | None = None
    _token_server: ThreadingHTTPServer | None = None

    @property
    def config(self) -> Path:
        return self.workdir / "config.yml"

    def url(self, repo: str) -> str:
        return f"oci://127.0.0.1:{self.port}/{repo}"

    def _write_config(self) -> None:
        auth = ""
        if self.token_auth:
            self.issuer = TokenIssuer(self.workdir)
            self._token_server = ThreadingHTTPServer(("127.0.0.1", 0), _token_handler(self.issuer))
            threading.Thread(target=self._token_server.serve_forever, daemon=True).start()
            realm = f"http://127.0.0.1:{self._token_server.server_address[1]}/token"
            auth = (f"auth:\n  token:\n    realm: {realm}\n    service: {SERVICE}\n"
                    f"    issuer: {ISSUER}\n    rootcertbundle: {self.issuer.cert}\n")
        self.config.write_text(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n"
            f"storage:\n  filesystem:\n    rootdirectory: {self.workdir / 'data'}\n"
            "  delete:\n    enabled: true\n"
            f"http:\n  addr: 127.0.0.1:{self.port}\n{auth}")

    def start(self) -> RegistryServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if not self.config.exists():
            self._write_config()
        log = self.workdir / "registry.log"  # a file: a full pipe would stall the registry
        with open(log, "ab") as out:
            self.proc = subprocess.Popen([registry_binary(), "serve", str(self.config)],
                                         stdout=subprocess.DEVNULL, stderr=out)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = log.read_text(errors="replace")
                raise RuntimeError(f"docker-registry exited: {err.strip()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("docker-registry did not start listening")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def garbage_collect(self) -> str:
        """The registry's own garbage-collect (unreferenced blobs deleted), run while it is
        stopped, as its documentation asks; started again after. Returns its output."""
        self.stop()
        try:
            p = subprocess.run([registry_binary(), "garbage-collect", str(self.config)],
                               capture_output=True, text=True, timeout=60)
            if p.returncode != 0:
                raise RuntimeError(f"garbage-collect failed: {p.stderr.strip()[-2000:]}")
            return p.stdout + p.stderr
        finally:
            self.start()

    def close(self) -> None:
        self.stop()
        if self._token_server is not None:
            self._token_server.shutdown()
            self._token_server.server_close()
