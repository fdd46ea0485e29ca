"""Cache backends, signing and blob transfer against a real nginx (WebDAV PUT) and a dir."""
from __future__ import annotations

import hashlib
import os
import socket
import sys
import threading
import tracemalloc
from pathlib import Path

import pytest
import zstandard

sys.path.insert(0, str(Path(__file__).parent / "nginx"))
from nginx_fixtures import nginx  # noqa: E402,F401  (fixture)
from nginx_server import PASSWORD, TOKEN, USER, NginxServer, free_port  # noqa: E402

from orchestrator.cache.backend import blob_key  # noqa: E402
from orchestrator.cache.backends import open_backend  # noqa: E402
from orchestrator.cache.blob_download import download_blobs  # noqa: E402
from orchestrator.cache.blob_upload import upload_blobs  # noqa: E402
from orchestrator.cache.cache_toml import CacheConfig, Credentials, load_config  # noqa: E402
from orchestrator.cache.errors import CacheError  # noqa: E402
from orchestrator.cache.signing import SecretKey, TrustedKeys, load_signing_key, write_key_pair  # noqa: E402
from orchestrator.cache.transfer import TransferStats  # noqa: E402
from orchestrator.errors import UserError  # noqa: E402

CFG = CacheConfig(jobs=4, timeout=5)
WRITER = Credentials(user=USER, password=PASSWORD)


def _blob(tmp: Path, name: str, data: bytes) -> tuple[str, int, Path]:
    p = tmp / name
    p.write_bytes(data)
    return hashlib.sha256(data).hexdigest(), len(data), p


@pytest.fixture(params=["http", "file"])
def backend_url(request: pytest.FixtureRequest, nginx: NginxServer, tmp_path: Path) -> str:
    if request.param == "http":
        return nginx.url("cache") + f"{request.node.name.replace('[', '-').strip(']')}/"
    (tmp_path / "shared").mkdir()
    return f"file://{tmp_path / 'shared'}"


def test_put_get_head_roundtrip(backend_url: str, tmp_path: Path) -> None:
    b = open_backend(backend_url, CFG, WRITER)
    assert not b.exists("ac/x.json") and b.get("ac/x.json") is None
    b.put("ac/x.json", lambda: [b'{"a":', b" 1}"])
    assert b.exists("ac/x.json") and b.get("ac/x.json") == b'{"a": 1}'
    with pytest.raises(CacheError, match="missing"):
        with b.stream("cas/" + "0" * 64) as chunks:
            list(chunks)


def test_blobs_stream_up_and_down_with_head_first(backend_url: str, tmp_path: Path) -> None:
    big = os.urandom(3 << 20) + b"\0" * (5 << 20)
    blobs = [_blob(tmp_path, "big", big), _blob(tmp_path, "small", b"hello\n"),
             _blob(tmp_path, "empty", b"")]
    b = open_backend(backend_url, CFG, WRITER)
    up = TransferStats()
    upload_blobs(b, blobs, 4, "push", up)
    assert (up.blobs_uploaded, up.blobs_present) == (3, 0)
    assert up.bytes_uploaded < len(big)          # zstd actually compressed the zeros
    again = TransferStats()
    upload_blobs(b, blobs, 4, "push", again)
    assert (again.blobs_uploaded, again.blobs_present) == (0, 3)
    out = tmp_path / "out"
    out.mkdir()
    down = TransferStats()
    download_blobs(b, [(sha, size, out / p.name) for sha, size, p in blobs], 3, "pull", down)
    for _, _, p in blobs:
        assert (out / p.name).read_bytes() == p.read_bytes()
    assert down.blobs_downloaded == 3 and down.bytes_written == len(big) + 6
    assert down.bytes_downloaded == up.bytes_uploaded


def _serve_raw(tmp_path: Path, url: str, key: str, raw: bytes, nginx: NginxServer) -> None:
    if url.startswith("file://"):
        p = Path(url[len("file://"):]) / key
    else:
        p = nginx.root / url.split("/", 3)[3] / key
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(raw)


@pytest.mark.parametrize("damage,message", [
    ("tamper", "content hash mismatch"),
    ("truncate", "truncated blob"),  # a short copy in the cache, not a cut stream
    ("garbage", "not valid zstd"),
    ("longer", "content hash mismatch .more data than"),
    ("replaced", "content hash mismatch .the blob holds"),  # whole zstd of other content
    ("padded", "far more compressed data"),
])
@pytest.mark.parametrize("size", [64 << 10, 3 << 20], ids=["small", "large"])  # both code paths
def test_bad_blobs_are_refused(backend_url: str, tmp_path: Path, nginx: NginxServer,
                               damage: str, message: str, size: int) -> None:
    data = os.urandom(size)
    sha = hashlib.sha256(data).hexdigest()
    good = zstandard.ZstdCompressor().compress(data)
    raw = {"tamper": zstandard.ZstdCompressor().compress(data[:-1] + bytes([data[-1] ^ 0xFF])),
           "truncate": good[: len(good) // 2],
           "garbage": b"not zstd at all" * 100,
           "longer": zstandard.ZstdCompressor().compress(data + b"more"),
           "replaced": zstandard.ZstdCompressor().compress(data[: size // 2]),
           # endless empty frames after the real one: no extra content, unbounded input
           "padded": good + zstandard.ZstdCompressor().compress(b"") * (size // 4)}[damage]
    _serve_raw(tmp_path, backend_url, blob_key(sha), raw, nginx)
    dest = tmp_path / "dest"
    with pytest.raises(CacheError, match=message):
        download_blobs(open_backend(backend_url, CFG), [(sha, len(data), dest)], 2, "pull",
                       TransferStats())


def test_http_writes_need_credentials(nginx: NginxServer) -> None:
    anon = open_backend(nginx.url("cache") + "anon/", CFG, Credentials())
    with pytest.raises(CacheError, match="ORCH_CACHE_TOKEN, or ORCH_CACHE_USER and "
                                         "ORCH_CACHE_PASSWORD") as e:
        anon.put("ac/a.json", lambda: [b"{}"])
    assert "\n" not in str(e.value) and "401" in str(e.value)
    half = open_backend(nginx.url("cache") + "anon/", CFG, Credentials(user="pusher"))
    with pytest.raises(CacheError, match="ORCH_CACHE_PASSWORD"):
        half.put("ac/a.json", lambda: [b"{}"])
    assert not (nginx.root / "cache/anon/ac/a.json").exists()
    tok = open_backend(nginx.url("token") + "t/", CFG, Credentials(token=TOKEN))
    tok.put("ac/a.json", lambda: [b"{}"])
    assert open_backend(nginx.url("token") + "t/", CFG, Credentials()).get("ac/a.json") == b"{}"
    with pytest.raises(CacheError, match="rejected"):
        open_backend(nginx.url("token") + "t/", CFG, Credentials(token="wrong")).put(
            "ac/b.json", lambda: [b"{}"])


def test_server_down_is_one_clear_line() -> None:
    url = f"http://127.0.0.1:{free_port()}/cache/"
    b = open_backend(url, CacheConfig(timeout=2), Credentials())
    with pytest.raises(CacheError, match="is down or unreachable") as e:
        b.get("ac/x.json")
    assert "\n" not in str(e.value)
    with pytest.raises(CacheError, match="is down"):
        b.exists("cas/" + "0" * 64)


def test_server_closing_early_is_refused(tmp_path: Path) -> None:
    """A server that announces the full length, sends half, and hangs up."""
    data = os.urandom(2 << 20)
    sha = hashlib.sha256(data).hexdigest()
    body = zstandard.ZstdCompressor().compress(data)
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]

    def serve() -> None:
        for _ in range(4):  # the client may retry; every attempt is cut short
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
                             + body[: len(body) // 2])
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        b = open_backend(f"http://127.0.0.1:{port}/", CacheConfig(timeout=5), Credentials())
        with pytest.raises(CacheError, match="cut short") as e:
            download_blobs(b, [(sha, len(data), tmp_path / "x")], 1, "pull", TransferStats())
        assert "\n" not in str(e.value)
    finally:
        srv.close()


def test_file_backend_missing_dir(tmp_path: Path) -> None:
    b = open_backend(f"file://{tmp_path}/not-mounted", CFG)
    with pytest.raises(CacheError, match="does not exist"):
        b.get("ac/x.json")


def test_signing_roundtrip_and_refusals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret_path, public = write_key_pair("team-1", tmp_path / "keys")
    assert secret_path.stat().st_mode & 0o777 == 0o600
    assert public.startswith("team-1:")
    monkeypatch.setenv("ORCH_CACHE_SIGNING_KEY", str(secret_path))
    key = load_signing_key()
    doc = {"id": "abc", "manifest": {"files": [{"path": "a", "sha256": "00"}]}}
    signed = dict(doc, signature=key.sign(doc))
    assert TrustedKeys([public]).verify(signed, "rec") == "team-1"
    other = SecretKey.generate("team-1")  # same name, different key
    with pytest.raises(CacheError, match="bad signature"):
        TrustedKeys([other.public.line()]).verify(signed, "rec")
    with pytest.raises(CacheError, match="untrusted key 'team-1'"):
        TrustedKeys([SecretKey.generate("bot").public.line()]).verify(signed, "rec")
    with pytest.raises(CacheError, match="unsigned"):
        TrustedKeys([public]).verify(doc, "rec")
    tampered = dict(signed, id="abd")
    with pytest.raises(CacheError, match="bad signature"):
        TrustedKeys([public]).verify(tampered, "rec")


def test_keys_and_config_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UserError, match="inside the repository"):
        write_key_pair("k", tmp_path / "repo" / "keys", repo_root=tmp_path / "repo")
    write_key_pair("k", tmp_path / "keys")
    with pytest.raises(UserError, match="already exists"):
        write_key_pair("k", tmp_path / "keys")
    monkeypatch.delenv("ORCH_CACHE_SIGNING_KEY", raising=False)
    with pytest.raises(UserError, match="ORCH_CACHE_SIGNING_KEY"):
        load_signing_key()
    cfg = tmp_path / "cache.toml"
    cfg.write_text('[cache]\nsubstituters = ["ftp://x"]\n')
    monkeypatch.setenv("ORCH_CACHE_CONFIG", str(cfg))
    with pytest.raises(UserError, match="cache.substituters"):
        load_config(tmp_path)
    cfg.write_text('[cache]\ntrusted-keys = ["team-1:notbase64!"]\n')
    with pytest.raises(UserError, match="not valid base64"):
        load_config(tmp_path)


def test_push_of_a_changed_local_file_is_aborted_mid_body(backend_url: str, tmp_path: Path) -> None:
    """The hash is re-checked while compressing; on mismatch the PUT never completes."""
    sha, size, src = _blob(tmp_path, "f", os.urandom(3 << 20))
    src.write_bytes(os.urandom(3 << 20))  # the "store" file changed after its manifest
    b = open_backend(backend_url, CFG, WRITER)
    with pytest.raises(CacheError, match="no longer matches its manifest hash"):
        upload_blobs(b, [(sha, size, src)], 2, "push", TransferStats())
    assert not b.exists(blob_key(sha))


def test_decompression_bomb_is_refused_without_inflating(backend_url: str, tmp_path: Path,
                                                          nginx: NginxServer) -> None:
    """A few kB that decompress to 200 MB, recorded as 64 kB: refused after 64 kB + 1."""
    sha = hashlib.sha256(b"x" * 65536).hexdigest()
    _serve_raw(tmp_path, backend_url, blob_key(sha),
               zstandard.ZstdCompressor().compress(b"\0" * (200 << 20)), nginx)
    tracemalloc.start()
    try:
        with pytest.raises(CacheError, match="more data than the record's 65536 bytes"):
            download_blobs(open_backend(backend_url, CFG), [(sha, 65536, tmp_path / "bomb")],
                           1, "pull", TransferStats())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, f"{peak} bytes allocated for a 64 kB blob"


def test_byte_ranges(backend_url: str) -> None:
    """stream(start=, length=) gives exactly those bytes (HTTP Range), fewer at the end."""
    data = os.urandom(700_000)
    b = open_backend(backend_url, CFG, WRITER)
    b.put("packs/r", lambda: [data])
    for start, length in ((0, None), (0, 10), (5, 1), (300_000, 262_145), (699_990, 100),
                          (12_345, None)):
        with b.stream("packs/r", 0, start, length) as chunks:
            got = b"".join(chunks)
        end = len(data) if length is None else start + length
        assert got == data[start:end], (start, length)
    with b.stream("packs/r", 0, 800_000, 10) as chunks:  # past the end: nothing, no error
        assert b"".join(chunks) == b""


@pytest.mark.parametrize("trailing", ["", "/"])
def test_file_urls_keep_their_slashes_in_messages(tmp_path: Path, trailing: str) -> None:
    """A file:// cache names a blob as <url>/<key>, whether or not the URL ends in '/'."""
    root = tmp_path / "fcache"
    data = os.urandom(4096)
    sha = hashlib.sha256(data).hexdigest()
    url = root.as_uri() + trailing
    _serve_raw(tmp_path, root.as_uri(), blob_key(sha), zstandard.ZstdCompressor().compress(data[:100]), None)
    with pytest.raises(CacheError) as err:
        download_blobs(open_backend(url, CFG), [(sha, len(data), tmp_path / "dest")], 1, "pull",
                       TransferStats())
    assert f"refused {root.as_uri()}/{blob_key(sha)}: content hash mismatch" in str(err.value)


WRITE_FAILS = """
import resource, signal, sys, threading
from pathlib import Path
from orchestrator.cache.backends import open_backend
from orchestrator.cache.blob_download import download_blobs
from orchestrator.cache.cache_toml import CacheConfig
from orchestrator.cache.errors import CacheError
from orchestrator.cache.transfer import TransferStats
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # write() then fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
url, sha, size, dest = sys.argv[1:]
try:
    download_blobs(open_backend(url, CacheConfig(jobs=2, timeout=5)),
                   [(sha, int(size), Path(dest))], 2, "pull", TransferStats())
except CacheError as e:
    print(e)
    sys.exit(3)
"""


def test_a_write_failure_inside_a_large_blob_is_one_line(tmp_path: Path) -> None:
    """The write thread of a large blob fails part-way (the file size limit: EFBIG); the
    decompressing, writing and hashing threads all stop, and the pull says why in one line."""
    import subprocess
    (tmp_path / "shared").mkdir()
    url = f"file://{tmp_path / 'shared'}"
    sha, size, _ = blob = _blob(tmp_path, "big", os.urandom(3 << 20))
    upload_blobs(open_backend(url, CFG), [blob], 1, "push", TransferStats())
    p = subprocess.run([sys.executable, "-c", WRITE_FAILS, url, sha, str(size),
                        str(tmp_path / "dest")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 3, p.stderr[-2000:]
    line = p.stdout.strip()
    assert line.startswith("cannot write to the store: File too large") and "\n" not in line
    assert (tmp_path / "dest").stat().st_size <= 1 << 20
