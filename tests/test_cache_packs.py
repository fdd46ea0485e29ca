"""Packed small files (record format /2) against file:// and a real nginx: a packed pull gives
the same files, contents the store already has are not fetched (byte ranges of a pack), old
records still pull, and a validly signed record or a pack that lies is refused before
anything is visible. Each of these runs with the members unpacked by this process's threads
and by forked worker processes (pack_processes: a pull of many small files); a pull stopped
by SIGINT or SIGKILL leaves no worker running.
"""
from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "nginx"))
from nginx_fixtures import nginx  # noqa: E402,F401  (fixture)
from nginx_server import NginxServer  # noqa: E402

from orchestrator.cache import pack_processes, pack_upload  # noqa: E402
from orchestrator.cache.backend import blob_key, pack_key, record_key  # noqa: E402
from orchestrator.cache.backends import open_backend  # noqa: E402
from orchestrator.cache.blob_upload import upload_blobs  # noqa: E402
from orchestrator.cache.cache_toml import CacheConfig  # noqa: E402
from orchestrator.cache.errors import CacheError  # noqa: E402
from orchestrator.cache.pack_upload import PACK_FILE_MAX  # noqa: E402
from orchestrator.cache.pull import pull  # noqa: E402
from orchestrator.cache.push import push_many  # noqa: E402
from orchestrator.cache.signing import SecretKey  # noqa: E402
from orchestrator.cache.transfer import TransferStats  # noqa: E402
from orchestrator.hashing import digest_of  # noqa: E402
from orchestrator.model.cache_record import MAX_PACKED_FILE, PACKED_FORMAT, RECORD_FORMAT, CacheRecord  # noqa: E402
from orchestrator.model.manifest import Manifest  # noqa: E402
from orchestrator.store.artifacts import Store  # noqa: E402

KEY = SecretKey.generate("team-p")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
MODULES = 400
CHANGED = "prefix/python/pkg/m3/mod201.py"


def _tree(stage: Path, changed: bool) -> None:
    """Hundreds of small files (text, and one incompressible), one big file, an executable,
    an empty file, a symlink and one content at two paths with different exec bits."""
    rng = random.Random(12)
    for i in range(MODULES):
        p = stage / "prefix" / "python" / "pkg" / f"m{i % 9}" / f"mod{i}.py"
        p.parent.mkdir(parents=True, exist_ok=True)
        text = f"# module {i}\n" + "".join(f"def f{j}():\n    return {i * j}\n"
                                           for j in range(i % 60))
        if changed and p.relative_to(stage).as_posix() == CHANGED:
            text += "# changed\n"
        p.write_text(text)
    lib = stage / "prefix" / "lib"
    lib.mkdir(parents=True)
    (lib / "libraw.so").write_bytes(rng.randbytes(3000))  # stored raw by zstd
    (lib / "libbig.so").write_bytes(rng.randbytes(PACK_FILE_MAX + 4096))  # a loose blob
    (lib / "libbig.so.1").symlink_to("libbig.so")
    (lib / "empty").write_bytes(b"")
    (stage / "prefix" / "bin").mkdir()
    for name, mode in (("tool", 0o755), ("tool.txt", 0o644)):
        (stage / "prefix" / "bin" / name).write_text("#!/bin/sh\necho same\n")
        os.chmod(stage / "prefix" / "bin" / name, mode)


def _commit(store: Store, tag: str, changed: bool = False) -> Path:
    derivation = {"schema": 1, "packs": tag}
    with store.staging(tag) as stage:
        _tree(stage, changed)
        manifest = Manifest(id=digest_of(derivation)[:40], recipe="demo", variant="release",
                            derivation=derivation, files=Manifest.scan_files(stage))
        return store.commit(stage, manifest)


@pytest.fixture(params=["file", "http"])
def cache_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "http":
        server: NginxServer = request.getfixturevalue("nginx")
        return server.url("open") + f"packs-{request.node.name.replace('[', '-').strip(']')}/"
    (tmp_path / "shared").mkdir()
    return f"file://{tmp_path / 'shared'}/"


@pytest.fixture(params=["threads", "processes"])
def unpack(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """How the pull unpacks its packs: the workers it is expected to fork (0: threads)."""
    if request.param == "threads":
        return 0
    monkeypatch.setattr(pack_processes, "MIN_MEMBERS", 1)  # the fixture trees are small:
    monkeypatch.setattr(pack_upload, "PACK_TARGET", 64 << 10)  # packs enough to share out
    return pack_processes.worker_count(1, 3)


def _config(url: str) -> CacheConfig:
    return CacheConfig(substituters=[url], trusted_keys=[KEY.public.line()], jobs=3, timeout=5)


def _area(url: str, nginx: NginxServer) -> Path:
    """The directory behind a cache URL (file:// or below the nginx root)."""
    if url.startswith("file://"):
        return Path(url[len("file://"):])
    return nginx.root / url.split("/", 3)[3]


def _record(url: str, artifact_id: str) -> dict:
    raw = open_backend(url, _config(url)).get(record_key(artifact_id))
    assert raw is not None
    return json.loads(raw)


def _same_files(a: Path, b: Path, manifest: Manifest) -> None:
    for f in manifest.files:
        if f.kind == "symlink":
            assert os.readlink(b / f.path) == f.target
            continue
        assert (b / f.path).read_bytes() == (a / f.path).read_bytes(), f.path
        assert os.stat(b / f.path).st_mode & 0o111 == os.stat(a / f.path).st_mode & 0o111


def store_is_untouched(root: Path) -> bool:
    store = Store(root)
    leftovers = list(store.tmp_dir.iterdir()) if store.tmp_dir.is_dir() else []
    return store.artifacts() == [] and leftovers == []


def test_packed_pull_gives_the_same_files(cache_url: str, tmp_path: Path, nginx: NginxServer,
                                          unpack: int) -> None:
    art = _commit(Store(tmp_path / "A").ensure(), "same")
    manifest = Store.read_manifest(art)
    up = TransferStats()
    push_many([art], _config(cache_url), KEY, stats=up)
    doc = _record(cache_url, manifest.id)
    contents = {f.sha256: f.size for f in manifest.files if f.kind == "file"}
    packed = {m["sha256"] for p in doc["packs"] for m in p["members"]}
    assert doc["format"] == PACKED_FORMAT
    assert packed == {sha for sha, size in contents.items() if size <= PACK_FILE_MAX}
    assert len(doc["packs"]) < len(packed) / 20
    assert up.blobs_uploaded == len(contents) and up.packs_uploaded == len(doc["packs"])
    backend = open_backend(cache_url, _config(cache_url))
    assert not any(backend.exists(blob_key(sha)) for sha in packed)  # not pushed twice
    assert all(backend.exists(blob_key(sha)) for sha in set(contents) - packed)

    mark = nginx.mark()
    down = TransferStats()
    path, _ = pull(Store(tmp_path / "B"), manifest.id, _config(cache_url), stats=down)
    _same_files(art, path, manifest)
    assert down.blobs_downloaded == len(contents) and down.packs_downloaded == len(doc["packs"])
    assert down.unpack_workers == min(unpack, len(doc["packs"]))
    assert down.bytes_written == sum(contents.values())
    # the phases the benchmarks print: each measured, together no more than the whole pull
    phases = (down.record_seconds, down.download_seconds, down.commit_seconds)
    assert all(s > 0 for s in phases) and sum(phases[1:]) <= down.seconds
    if cache_url.startswith("http"):
        gets = [e for e in nginx.access_log()[mark:] if e.method == "GET"]
        assert len(gets) == 1 + len(doc["packs"]) + len(set(contents) - packed)
        assert sum(e.body_bytes_sent for e in gets if "/ac/" not in e.uri) == \
            down.bytes_downloaded


def test_contents_already_local_are_not_downloaded(cache_url: str, tmp_path: Path,
                                                   nginx: NginxServer, unpack: int) -> None:
    store_a = Store(tmp_path / "A").ensure()
    base, new = _commit(store_a, "base"), _commit(store_a, "new", changed=True)
    base_m, new_m = Store.read_manifest(base), Store.read_manifest(new)
    config = _config(cache_url)
    push_many([base], config, KEY)
    again = TransferStats()
    push_many([new], config, KEY, stats=again)
    packs = _record(cache_url, new_m.id)["packs"]
    assert again.packs_uploaded <= 2 and again.packs_present >= len(packs) - 2  # content-defined
    pull(Store(tmp_path / "B"), base_m.id, config)

    changed = next(f.sha256 for f in new_m.files if f.path == CHANGED)
    [(pack, member)] = [(p, m) for p in packs for m in p["members"] if m["sha256"] == changed]
    mark = nginx.mark()
    stats = TransferStats()
    path, _ = pull(Store(tmp_path / "B"), new_m.id, config, stats=stats)
    _same_files(new, path, new_m)
    assert stats.blobs_downloaded == 1 and stats.bytes_downloaded == member["length"]
    assert stats.files_linked == len({f.sha256 for f in new_m.files if f.kind == "file"}) - 1
    if cache_url.startswith("http"):
        gets = [e for e in nginx.access_log()[mark:] if e.method == "GET"]
        assert [(e.uri.rsplit("/", 2)[-2:], e.status, e.body_bytes_sent) for e in gets[1:]] == \
            [(["packs", pack["sha256"]], 206, member["length"])]


class _NoRanges(http.server.SimpleHTTPRequestHandler):
    """A plain static server: answers every GET with the whole file (200), ignoring Range."""

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def no_range_server(nginx: NginxServer) -> Iterator[str]:
    handler = functools.partial(_NoRanges, directory=str(nginx.root))
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/"
    srv.shutdown()
    srv.server_close()


def test_server_without_ranges_still_delivers(nginx: NginxServer, no_range_server: str,
                                              tmp_path: Path) -> None:
    url = nginx.url("open") + "packs-no-ranges/"
    store_a = Store(tmp_path / "A").ensure()
    base, new = _commit(store_a, "nr-base"), _commit(store_a, "nr-new", changed=True)
    push_many([base, new], _config(url), KEY)
    plain = no_range_server + "open/packs-no-ranges/"
    pull(Store(tmp_path / "B"), Store.read_manifest(base).id, _config(plain))
    stats = TransferStats()
    path, _ = pull(Store(tmp_path / "B"), Store.read_manifest(new).id, _config(plain),
                   stats=stats)
    _same_files(new, path, Store.read_manifest(new))
    assert stats.blobs_downloaded == 1


def test_old_format_record_still_pulls(cache_url: str, tmp_path: Path) -> None:
    """What a pusher before packs wrote: every content a cas/ blob, a /1 record."""
    art = _commit(Store(tmp_path / "A").ensure(), "old")
    manifest = Store.read_manifest(art)
    backend = open_backend(cache_url, _config(cache_url))
    record = CacheRecord.for_manifest(manifest)
    upload_blobs(backend, [(sha, f.size, art / f.path) for sha, f in record.blobs().items()],
                 3, "push", TransferStats())
    doc = record.payload()
    assert doc["format"] == RECORD_FORMAT and "packs" not in doc
    doc["signature"] = KEY.sign(doc)
    backend.put(record_key(manifest.id), lambda: [json.dumps(doc).encode()])
    stats = TransferStats()
    path, _ = pull(Store(tmp_path / "B"), manifest.id, _config(cache_url), stats=stats)
    _same_files(art, path, manifest)
    assert stats.packs_downloaded == 0 and stats.blobs_downloaded == len(record.blobs())


# ---- refusals ------------------------------------------------------------------------------

Doc = dict


def _first_pack(doc: Doc) -> dict:
    return max(doc["packs"], key=lambda p: len(p["members"]))


def _member_of(doc: Doc, path: str) -> tuple[dict, dict]:
    sha = next(f["sha256"] for f in doc["manifest"]["files"] if f["path"] == path)
    return next((p, m) for p in doc["packs"] for m in p["members"] if m["sha256"] == sha)


def _shift(delta: int) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        _first_pack(doc)["members"][1]["offset"] += delta
    return mutate


def _set_member(field: str, value: object) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        _first_pack(doc)["members"][0][field] = value
    return mutate


def _twice(doc: Doc) -> None:
    members = _first_pack(doc)["members"]
    members[1]["sha256"] = members[0]["sha256"]


def _short_size(doc: Doc) -> None:
    _first_pack(doc)["size"] -= 1


def _bad_name(doc: Doc) -> None:
    _first_pack(doc)["sha256"] = "../../ac/x"


def _old_format(doc: Doc) -> None:
    doc["format"] = RECORD_FORMAT


def _huge_member(doc: Doc) -> None:
    sha = _first_pack(doc)["members"][0]["sha256"]
    for f in doc["manifest"]["files"]:
        if f["sha256"] == sha:
            f["size"] = MAX_PACKED_FILE + 1


RECORD_CASES: dict[str, tuple[Callable[[Doc], None], str]] = {
    "gap": (_shift(1), "is not where the previous frame ends"),
    "overlap": (_shift(-1), "is not where the previous frame ends"),
    "negative-offset": (_set_member("offset", -7), "is not where the previous frame ends"),
    "length-bomb": (_set_member("length", 1 << 40), "out of bounds"),
    "stranger": (_set_member("sha256", "c" * 64), "is no file content of the manifest"),
    "placed-twice": (_twice, "placed twice"),
    "pack-size": (_short_size, "members end at"),
    "pack-name": (_bad_name, "not 64 hex"),
    "packs-in-format-1": (_old_format, "has no packs"),
    "member-too-big": (_huge_member, "out of bounds"),
}


def _flip_raw_member(doc: Doc, area: Path) -> None:
    pack, member = _member_of(doc, "prefix/lib/libraw.so")
    path = area / pack_key(pack["sha256"])
    data = bytearray(path.read_bytes())
    data[member["offset"] + member["length"] - 1] ^= 0xFF  # inside the raw block's payload
    path.write_bytes(bytes(data))


def _cut_pack(doc: Doc, area: Path) -> None:
    path = area / pack_key(_first_pack(doc)["sha256"])
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _lengthen_pack(doc: Doc, area: Path) -> None:
    path = area / pack_key(_first_pack(doc)["sha256"])
    path.write_bytes(path.read_bytes() + b"\0" * 300_000)


def _drop_pack(doc: Doc, area: Path) -> None:
    (area / pack_key(_first_pack(doc)["sha256"])).unlink()


def _drop_blob(doc: Doc, area: Path) -> None:
    """A loose blob (this process's share while workers unpack the packs) is gone."""
    sha = next(f["sha256"] for f in doc["manifest"]["files"] if f["path"] == "prefix/lib/libbig.so")
    (area / blob_key(sha)).unlink()


PACK_CASES: dict[str, tuple[Callable[[Doc, Path], None], str]] = {
    "tampered-pack": (_flip_raw_member, "content hash mismatch"),
    "truncated-pack": (_cut_pack, "truncated pack"),
    "longer-pack": (_lengthen_pack, "not the pack the record describes"),
    "missing-pack": (_drop_pack, "is missing"),
    "missing-blob": (_drop_blob, "is missing"),
}


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _commit(Store(tmp_path_factory.mktemp("packs-src")).ensure(), "hostile")


@pytest.mark.parametrize("case", sorted(RECORD_CASES) + sorted(PACK_CASES))
def test_lying_packs_are_refused_once(case: str, cache_url: str, source: Path, tmp_path: Path,
                                      nginx: NginxServer, capsys: pytest.CaptureFixture[str],
                                      unpack: int) -> None:
    config = _config(cache_url)
    manifest = Store.read_manifest(source)
    push_many([source], config, KEY)
    doc = _record(cache_url, manifest.id)
    if case in RECORD_CASES:
        mutate, fragment = RECORD_CASES[case]
        mutate(doc)
        doc.pop("signature")
        doc["signature"] = KEY.sign(doc)  # validly signed: the record itself must be judged
        open_backend(cache_url, config).put(record_key(manifest.id),
                                            lambda: [json.dumps(doc).encode()])
    else:
        damage, fragment = PACK_CASES[case]
        damage(doc, _area(cache_url, nginx))
    root = tmp_path / "store"
    with pytest.raises(CacheError) as err:
        pull(Store(root), manifest.id, config)
    message = str(err.value)
    assert fragment in message, message
    assert not CONTROL.search(message) and "\n" not in message, repr(message)
    assert capsys.readouterr().err == ""
    assert store_is_untouched(root)


def test_a_partly_local_pack_with_a_lying_member_is_refused(cache_url: str, tmp_path: Path,
                                                            nginx: NginxServer,
                                                            unpack: int) -> None:
    """A byte-range pull checks each member it asks for as strictly as a whole pack."""
    store_a = Store(tmp_path / "A").ensure()
    base, new = _commit(store_a, "lie-base"), _commit(store_a, "lie-new", changed=True)
    config = _config(cache_url)
    push_many([base, new], config, KEY)
    pull(Store(tmp_path / "B"), Store.read_manifest(base).id, config)
    new_m = Store.read_manifest(new)
    pack, member = _member_of(_record(cache_url, new_m.id), CHANGED)
    path = _area(cache_url, nginx) / pack_key(pack["sha256"])
    data = bytearray(path.read_bytes())
    data[member["offset"]: member["offset"] + member["length"]] = b"\0" * member["length"]
    path.write_bytes(bytes(data))
    before = sorted(p.name for p in (tmp_path / "B" / "store").iterdir())
    with pytest.raises(CacheError, match="member") as err:
        pull(Store(tmp_path / "B"), new_m.id, config)
    assert "not valid zstd" in str(err.value) or "content hash mismatch" in str(err.value)
    assert sorted(p.name for p in (tmp_path / "B" / "store").iterdir()) == before
    staging = tmp_path / "B" / "tmp"
    assert not staging.is_dir() or not list(staging.iterdir())


def test_pack_hashes_are_of_their_bytes(cache_url: str, source: Path, nginx: NginxServer) -> None:
    """A pack's name is the sha256 of its bytes, so two pushers never disagree on a name."""
    config = _config(cache_url)
    push_many([source], config, KEY)
    doc = _record(cache_url, Store.read_manifest(source).id)
    for p in doc["packs"]:
        data = (_area(cache_url, nginx) / pack_key(p["sha256"])).read_bytes()
        assert hashlib.sha256(data).hexdigest() == p["sha256"] and len(data) == p["size"]


# ---- a pull stopped while its workers unpack ------------------------------------------------

class _Stall(http.server.SimpleHTTPRequestHandler):
    """Sends the first kilobyte of every pack, then nothing for a minute: the workers sit in
    a read, writing no progress to their parent (so only PR_SET_PDEATHSIG ends them when the
    parent is killed, before the cache's timeout). Other files go out whole."""

    def copyfile(self, source, outputfile) -> None:  # type: ignore[no-untyped-def]
        if "/packs/" not in self.path:
            return super().copyfile(source, outputfile)
        outputfile.write(source.read(1024))
        outputfile.flush()
        time.sleep(60)

    def log_message(self, *args: object) -> None:
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the stopped pull's connections break mid-file: expected


PULLER = """
import sys
from orchestrator.cache import pack_processes, pack_upload
from orchestrator.cache.cache_toml import CacheConfig
from orchestrator.cache.pull import pull
from orchestrator.store.artifacts import Store
pack_processes.MIN_MEMBERS = 1
pack_upload.PACK_TARGET = 64 << 10
url, key, root, artifact = sys.argv[1:5]
pull(Store(root), artifact, CacheConfig(substituters=[url], trusted_keys=[key], jobs=3,
                                        timeout=60))
"""


def _children(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(entry.name))
    return kids


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"  # exited, waiting for a parent that is itself gone or reaping


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_a_stopped_pull_leaves_no_worker_running(sig: signal.Signals, source: Path,
                                                 tmp_path: Path, nginx: NginxServer,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    url = nginx.url("open") + f"packs-stop-{sig.name}/"
    monkeypatch.setattr(pack_upload, "PACK_TARGET", 64 << 10)
    monkeypatch.setattr(pack_processes, "MIN_MEMBERS", 1)  # as PULLER does
    push_many([source], _config(url), KEY)
    packs = len(_record(url, Store.read_manifest(source).id)["packs"])
    expected = min(pack_processes.worker_count(1, 3), packs)
    assert expected >= 2
    artifact = Store.read_manifest(source).id
    handler = functools.partial(_Stall, directory=str(nginx.root))
    srv = _QuietServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    slow = f"http://127.0.0.1:{srv.server_address[1]}/open/packs-stop-{sig.name}/"
    root = tmp_path / "store"
    env = {**os.environ, "ORCH_NO_PROGRESS": "1",
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen([sys.executable, "-c", PULLER, slow, KEY.public.line(), str(root),
                             artifact], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        workers: list[int] = []
        while len(workers) < expected and time.monotonic() < deadline:
            time.sleep(0.05)
            workers = _children(proc.pid)
        assert len(workers) == expected, f"the pull forked {len(workers)} workers"
        time.sleep(0.3)  # the workers are receiving their packs
        assert proc.poll() is None, "the pull ended before it was stopped"
        os.kill(proc.pid, sig)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 3  # the server stalls them for a minute
        while not all(_gone(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(_gone(w) for w in workers), f"workers still running: {workers}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        srv.shutdown()
        srv.server_close()
    assert Store(root).artifacts() == []
    if sig == signal.SIGINT:  # unwound: its staging dir is gone with it
        assert store_is_untouched(root)
    # whatever it left, the next pull cleans up (as `doit pull` and every build start) and
    # delivers the artifact
    Store(root).clean_stale()
    path, _ = pull(Store(root), artifact, _config(url))
    _same_files(source, path, Store.read_manifest(source))
    assert store_is_untouched_but(root, path)


def store_is_untouched_but(root: Path, path: Path) -> bool:
    store = Store(root)
    leftovers = list(store.tmp_dir.iterdir()) if store.tmp_dir.is_dir() else []
    return store.artifacts() == [path] and leftovers == []
