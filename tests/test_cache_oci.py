"""The team cache in a real OCI registry (Debian's docker-registry, CNCF distribution 2.8)
started on 127.0.0.1: push and pull with and without token auth, blobs shared between
artifacts (HEAD first), chunked uploads, a garbage-collect between pushes, and every bad
registry answer refused with one line, exit 2, nothing written.
"""
from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

sys.path.insert(0, str(Path(__file__).parent / "oci"))
from registry_fixtures import registry, token_registry  # noqa: E402,F401  (fixtures)
from registry_server import PASSWORD, USER, RegistryServer  # noqa: E402

from orchestrator.cache import oci_upload, pack_processes, pack_upload  # noqa: E402
from orchestrator.cache.backend import blob_key, record_key  # noqa: E402
from orchestrator.cache.backends import open_backend  # noqa: E402
from orchestrator.cache.cache_toml import CacheConfig, Credentials  # noqa: E402
from orchestrator.cache.errors import CacheError  # noqa: E402
from orchestrator.cache.oci_manifest import KEY_ANNOTATION, MANIFEST_LIMIT, tag_part  # noqa: E402
from orchestrator.cache.pack_upload import PACK_FILE_MAX  # noqa: E402
from orchestrator.cache.pull import fetch_record, pull, pull_record  # noqa: E402
from orchestrator.cache.push import push_many  # noqa: E402
from orchestrator.cache.signing import SecretKey  # noqa: E402
from orchestrator.cache.transfer import TransferStats  # noqa: E402
from orchestrator.hashing import digest_of  # noqa: E402
from orchestrator.model.manifest import Manifest  # noqa: E402
from orchestrator.store.artifacts import Store  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
KEY = SecretKey.generate("team-o")
WRITER = Credentials(user=USER, password=PASSWORD)
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _commit(store: Store, tag: str, big: int = PACK_FILE_MAX + 4096) -> Path:
    """120 small files (packed), one big loose blob (shared by every tag), one per tag,
    an executable and a symlink."""
    derivation = {"schema": 1, "oci": tag}
    rng = random.Random(7)
    with store.staging(tag) as stage:
        for i in range(120):
            p = stage / "prefix" / "py" / f"m{i % 5}" / f"mod{i}.py"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(f"# {i}\n" + "x = 1\n" * (i % 40))
        lib = stage / "prefix" / "lib"
        lib.mkdir(parents=True)
        (lib / "libshared.so").write_bytes(rng.randbytes(big))
        (lib / f"lib{tag}.so").write_bytes(os.urandom(PACK_FILE_MAX + 1000))
        (lib / "libshared.so.1").symlink_to("libshared.so")
        (stage / "prefix" / "bin").mkdir()
        (stage / "prefix" / "bin" / "tool").write_text("#!/bin/sh\necho tool\n")
        os.chmod(stage / "prefix" / "bin" / "tool", 0o755)
        manifest = Manifest(id=digest_of(derivation)[:40], recipe="demo", variant="relwithdebinfo",
                            derivation=derivation, files=Manifest.scan_files(stage))
        return store.commit(stage, manifest)


def _config(url: str) -> CacheConfig:
    return CacheConfig(substituters=[url], push=url, trusted_keys=[KEY.public.line()], jobs=3,
                       timeout=10)


def _same_files(a: Path, b: Path) -> None:
    for f in Store.read_manifest(a).files:
        if f.kind == "symlink":
            assert os.readlink(b / f.path) == f.target
        else:
            assert (b / f.path).read_bytes() == (a / f.path).read_bytes(), f.path
            assert os.stat(b / f.path).st_mode & 0o111 == os.stat(a / f.path).st_mode & 0o111


def store_is_untouched(root: Path) -> bool:
    store = Store(root)
    leftovers = list(store.tmp_dir.iterdir()) if store.tmp_dir.is_dir() else []
    return store.artifacts() == [] and leftovers == []


def _tags(server: RegistryServer, repo: str, token: bool) -> list[str]:
    url = f"http://127.0.0.1:{server.port}/v2/{repo}/tags/list"
    headers = {}
    if token:
        assert server.issuer is not None
        headers["Authorization"] = "Bearer " + server.issuer.token(f"repository:{repo}:pull",
                                                                   True)
    r = requests.get(url, headers=headers, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["tags"]


@pytest.mark.parametrize("auth", ["none", "token"])
def test_push_gc_push_pull(auth: str, tmp_path: Path, request: pytest.FixtureRequest,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    server: RegistryServer = request.getfixturevalue("registry" if auth == "none"
                                                     else "token_registry")
    repo = f"team/{auth}-cache"
    url = server.url(repo)
    config = _config(url)
    store_a = Store(tmp_path / "A").ensure()
    first, second = _commit(store_a, "first"), _commit(store_a, "second")
    monkeypatch.setattr(pack_upload, "PACK_TARGET", 16 << 10)  # packs to share out
    for var, value in (("ORCH_CACHE_USER", USER), ("ORCH_CACHE_PASSWORD", PASSWORD)):
        monkeypatch.setenv(var, value)
    if auth == "token":  # without credentials the token service grants pull only
        monkeypatch.delenv("ORCH_CACHE_PASSWORD")
        with pytest.raises(CacheError) as err:
            push_many([first], config, KEY)
        assert "refused" in str(err.value) and "401" in str(err.value), err.value
        assert "ORCH_CACHE_PASSWORD" in str(err.value)
        monkeypatch.setenv("ORCH_CACHE_PASSWORD", PASSWORD)
    up = TransferStats()
    push_many([first], config, KEY, stats=up)
    assert up.blobs_uploaded > 0 and up.packs_uploaded > 0
    print(server.garbage_collect())  # nothing a record names may go
    again = TransferStats()
    push_many([second], config, KEY, stats=again)
    # the shared big blob and the packs of identical small files: HEAD found them
    assert again.blobs_present >= 121 and again.blobs_uploaded == 1, again
    server.garbage_collect()
    monkeypatch.delenv("ORCH_CACHE_USER")
    monkeypatch.delenv("ORCH_CACHE_PASSWORD")
    for art, forks in ((first, False), (second, True)):  # the packs unpacked by threads, then
        manifest = Store.read_manifest(art)             # by forked workers (pack_processes)
        monkeypatch.setattr(pack_processes, "MIN_MEMBERS", 1 if forks else 1 << 30)
        stats = TransferStats()
        path, got_from = pull(Store(tmp_path / f"B-{art.name[:6]}"), manifest.id, config,
                              stats=stats)
        assert got_from == url
        _same_files(art, path)
        assert stats.unpack_workers == \
            (min(pack_processes.worker_count(1, 3), stats.packs_downloaded) if forks else 0)
        assert stats.packs_downloaded >= 2
    tags = _tags(server, repo, auth == "token")
    for art in (first, second):
        ident = Store.read_manifest(art).id
        assert f"ac-{ident}" in tags and f"demo--relwithdebinfo--{ident[:12]}" in tags
    if auth == "token":
        assert server.issuer is not None
        assert f"repository:{repo}:pull" in server.issuer.issued  # anonymous pulls got tokens


def test_big_blob_is_uploaded_in_chunks(registry: RegistryServer, tmp_path: Path,  # noqa: F811
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(oci_upload, "UPLOAD_CHUNK", 1 << 20)
    url = registry.url("team/chunks")
    art = _commit(Store(tmp_path / "A").ensure(), "chunks", big=5 << 20)
    backend = open_backend(url, _config(url), WRITER)
    methods: list[str] = []
    backend.client.session.hooks["response"].append(  # type: ignore[attr-defined]
        lambda r, *a, **k: methods.append(r.request.method))
    try:
        from orchestrator.cache.push import push_artifact
        push_artifact(art, backend, KEY, 2)
    finally:
        backend.close()
    assert methods.count("PATCH") >= 4, methods  # 5 MiB of random bytes in 1 MiB chunks
    path, _ = pull(Store(tmp_path / "B"), Store.read_manifest(art).id, _config(url))
    _same_files(art, path)


def test_mid_sized_files_cost_the_registry_few_blob_requests(registry: RegistryServer,  # noqa: F811
                                                            tmp_path: Path) -> None:
    """A registry spends CPU per blob it serves, so files up to 1 MiB go in packs of ~4 MiB:
    forty files of 300-1000 KiB (a torch/ tree has ~130 such) and a hundred small ones take a
    handful of blob GETs, not one each (with 256 KiB the limit, it was over forty)."""
    rng = random.Random(11)
    derivation = {"schema": 1, "oci": "mid"}
    store = Store(tmp_path / "A").ensure()
    with store.staging("mid") as stage:
        for i in range(40):
            p = stage / "prefix" / "lib" / f"part{i}.bin"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(rng.randbytes(rng.randrange(300 << 10, 1000 << 10)))
        for i in range(100):
            p = stage / "prefix" / "py" / f"m{i}.py"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(f"# {i}\n" + "y = 2\n" * i)
        manifest = Manifest(id=digest_of(derivation)[:40], recipe="demo", variant="release",
                            derivation=derivation, files=Manifest.scan_files(stage))
        art = store.commit(stage, manifest)
    url = registry.url("team/mid")
    push_many([art], _config(url), KEY)
    blob_gets: list[str] = []
    backend = open_backend(url, _config(url))
    backend.client.session.hooks["response"].append(  # type: ignore[attr-defined]
        lambda r, *a, **k: blob_gets.append(r.url) if "/blobs/" in r.url else None)
    stats = TransferStats()
    try:
        record = fetch_record(backend, manifest.id, _config(url).trusted())
        assert record is not None
        path = pull_record(record, Store(tmp_path / "B"), backend, 3, stats)
    finally:
        backend.close()
    _same_files(art, path)
    assert stats.blobs_downloaded == 140 and stats.unpack_workers == 0, stats
    # ~28 MiB of contents in packs averaging 4 MiB (none over 8 MiB), plus the record's config
    assert 4 <= len(blob_gets) <= 12, blob_gets


def test_changed_file_aborts_the_upload(registry: RegistryServer,  # noqa: F811
                                        tmp_path: Path) -> None:
    """A store file changed under the push: the upload is dropped, the blob never appears."""
    url = registry.url("team/abort")
    src = tmp_path / "big"
    src.write_bytes(os.urandom(1 << 20))
    backend = open_backend(url, _config(url), WRITER)
    try:
        from orchestrator.cache.blob_upload import upload_blobs
        with pytest.raises(CacheError, match="no longer matches"):
            upload_blobs(backend, [("0" * 64, 1 << 20, src)], 1, "push", TransferStats())
        assert not backend.exists(blob_key("0" * 64))
    finally:
        backend.close()


# ---- bad registries ---------------------------------------------------------------------------

BIG = b'{"schemaVersion": 2, "layers": [' + b'{"x": 1},' * (MANIFEST_LIMIT // 9) + b"{}]}"


class _Bad(BaseHTTPRequestHandler):
    """A registry that answers every manifest request badly, per the repository's name."""

    def do_GET(self) -> None:  # noqa: N802
        mode = self.path.split("/")[2] if self.path.count("/") > 2 else ""
        if mode == "unauthorized":
            self._send(401, b'{"errors": [{"code": "UNAUTHORIZED"}]}',
                       {"WWW-Authenticate": 'Basic realm="registry"'})
        elif mode == "forbidden":
            self._send(403, b'{"errors": [{"code": "DENIED", "message": "no"}]}')
        elif mode == "broken":
            self._send(500, b'{"errors": [{"code": "UNKNOWN", "message": "disk \\u001b[31mgone"}]}')
        elif mode == "redirect":
            self._send(307, b"", {"Location": f"http://127.0.0.2:{self.server.server_address[1]}"
                                              f"{self.path}"})
        elif mode == "stalled":  # answers after the client's overall deadline (timeout = 1)
            time.sleep(3)
            self._send(404, b"{}")
        elif mode == "oversized":  # no Content-Length: the reader's own limit must stop it
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(BIG)
        else:
            self._send(404, b"{}")

    def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class _Quiet(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the stalled case's client hangs up first: expected


@pytest.fixture(scope="module")
def bad_registry() -> Iterator[int]:
    server = _Quiet(("127.0.0.1", 0), _Bad)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


BAD = {"unauthorized": "401): set ORCH_CACHE_TOKEN", "forbidden": "403): the registry forbids",
       "broken": "500 Internal Server Error (UNKNOWN: disk \\x1b[31mgone)",
       "redirect": "redirected GET to another host (127.0.0.2",
       "oversized": "larger than 4194304 bytes", "missing": "no substituter has",
       "stalled": "gave up after 1s, the overall deadline"}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_registry_is_one_line(case: str, bad_registry: int, registry: RegistryServer,  # noqa: F811
                                  tmp_path: Path) -> None:
    url = registry.url("team/empty") if case == "missing" else \
        f"oci://127.0.0.1:{bad_registry}/{case}/cache"
    cfg = tmp_path / "cache.toml"
    cfg.write_text(f"[cache]\nsubstituters = [{json.dumps(url)}]\n"
                   f"trusted-keys = [{json.dumps(KEY.public.line())}]\n"
                   f"timeout = {1 if case == 'stalled' else 5}\n")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ORCH_")},
           "ORCH_CACHE_CONFIG": str(cfg), "ORCH_NO_PROGRESS": "1"}
    store = tmp_path / "store"
    p = subprocess.run([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), "pull",
                        f"store={store}", f"id={'ab' * 20}"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), p.stderr
    assert BAD[case] in lines[0], lines[0]
    assert not CONTROL.search(p.stderr.replace("\n", ""))
    assert store_is_untouched(store)


def test_url_is_checked(tmp_path: Path) -> None:
    for bad in ("oci://127.0.0.1:5000/", "oci://127.0.0.1:5000/Upper/Case",
                "oci://127.0.0.1:5000/a//b"):
        with pytest.raises(CacheError, match="use oci://host"):
            open_backend(bad, _config("oci://127.0.0.1/x"))
    with pytest.raises(CacheError, match="hold no"):
        open_backend("oci://127.0.0.1:1/x", _config("oci://127.0.0.1/x")).get("cas/" + "0" * 64)
    assert record_key("a" * 40) == f"ac/{'a' * 40}.json"
    assert tag_part("rel+debug/" + "v" * 50) == "rel_debug_" + "v" * 30  # OCI tag charset


# ---- hostile manifests ------------------------------------------------------------------------

def _swap(doc: dict) -> tuple[dict, str]:
    return doc, "is not the one for"


def _pack_lie(doc: dict) -> tuple[dict, str]:
    packs = [d for d in doc["layers"] if d["annotations"][KEY_ANNOTATION].startswith("packs/")]
    other = next(d for d in doc["layers"] if d["digest"] != packs[0]["digest"])
    packs[0]["digest"], packs[0]["size"] = other["digest"], other["size"]
    return doc, "but names sha256:"


def _config_media(doc: dict) -> tuple[dict, str]:
    doc["config"]["mediaType"] = "application/vnd.oci.image.config.v1+json"
    return doc, "its config is 'application/vnd.oci.image.config.v1+json'"


def _no_key(doc: dict) -> tuple[dict, str]:
    del doc["layers"][0]["annotations"]
    return doc, "layer 0 has no cache key"


HOSTILE = {"swapped-tag": _swap, "pack-digest-lie": _pack_lie, "config-media": _config_media,
           "layer-without-key": _no_key}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_manifest_is_refused(case: str, registry: RegistryServer,  # noqa: F811
                                     tmp_path: Path) -> None:
    """Manifests the registry accepts (their blobs exist) but that lie about the cache."""
    repo = f"team/manifest-{case}"
    url = registry.url(repo)
    store_a = Store(tmp_path / "A").ensure()
    art, other = _commit(store_a, "real"), _commit(store_a, "victim")
    push_many([art], _config(url), KEY)
    api = f"http://127.0.0.1:{registry.port}/v2/{repo}/manifests/"
    accept = {"Accept": "application/vnd.oci.image.manifest.v1+json"}
    doc = requests.get(api + f"ac-{Store.read_manifest(art).id}", headers=accept, timeout=10).json()
    target = Store.read_manifest(other if case == "swapped-tag" else art).id
    doc, fragment = HOSTILE[case](doc)
    put = requests.put(api + f"ac-{target}", data=json.dumps(doc),
                       headers={"Content-Type": doc["mediaType"]}, timeout=10)
    assert put.status_code == 201, put.text
    root = tmp_path / "B"
    with pytest.raises(CacheError) as err:
        pull(Store(root), target, _config(url))
    message = str(err.value)
    assert fragment in message and "refused" in message and "\n" not in message, message
    assert store_is_untouched(root)


def test_write_probes_round_trip_through_the_registry(registry: RegistryServer,  # noqa: F811
                                                      tmp_path: Path) -> None:
    """`doit cache-check` and the nightly preflight write a probe to the push URL and read it
    back: an oci:// cache refused `checks/...` keys, so both failed on every registry. Each
    writer's probe is its own pointer tag; a probe another writer overwrote reads back as
    theirs, and a probe not written is None."""
    from orchestrator.cache.backend import probe_key
    url = registry.url("team/probes")
    backend = open_backend(url, _config(url), WRITER)
    mine, theirs = probe_key("write-probe", "host-a", "0"), probe_key("write-probe", "host-b", "0")
    try:
        assert backend.get(mine) is None and not backend.exists(mine)
        for key, body in ((mine, b"probe a 1\n"), (theirs, b"probe b\n"), (mine, b"probe a 2\n")):
            assert backend.put(key, lambda body=body: iter([body]), len(body)) == len(body)
        assert backend.get(mine) == b"probe a 2\n" and backend.get(theirs) == b"probe b\n"
        assert backend.exists(theirs)
    finally:
        backend.close()
    assert sorted(t for t in _tags(registry, "team/probes", False) if t.startswith("checks-")) \
        == sorted("checks-" + k.split("/", 1)[1] for k in (mine, theirs))
