"""Crafted cache records, validly signed by a trusted key, against file://, a real nginx and a
real OCI registry (docker-registry).

Each must be refused before anything is written (nothing in the store, no staging dir
left), with one message naming its true cause and no raw control characters; and
substitute() (what `doit build` calls) must turn it into one warning and build locally.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import zstandard

sys.path.insert(0, str(Path(__file__).parent / "nginx"))
sys.path.insert(0, str(Path(__file__).parent / "oci"))
from nginx_fixtures import nginx  # noqa: E402,F401  (fixture)
from nginx_server import PASSWORD, USER, NginxServer  # noqa: E402
from registry_fixtures import registry  # noqa: E402,F401  (fixture)
from registry_server import RegistryServer  # noqa: E402

from orchestrator.cache import substitute  # noqa: E402
from orchestrator.cache.backend import blob_key, record_key  # noqa: E402
from orchestrator.cache.backends import open_backend  # noqa: E402
from orchestrator.cache.blob_upload import upload_blobs  # noqa: E402
from orchestrator.cache.cache_toml import CacheConfig, Credentials  # noqa: E402
from orchestrator.cache.errors import CacheError  # noqa: E402
from orchestrator.cache.pull import pull  # noqa: E402
from orchestrator.cache.signing import SecretKey  # noqa: E402
from orchestrator.cache.transfer import TransferStats  # noqa: E402
from orchestrator.config.settings import Settings  # noqa: E402
from orchestrator.hashing import digest_of  # noqa: E402
from orchestrator.model.cache_record import CacheRecord  # noqa: E402
from orchestrator.model.manifest import Manifest  # noqa: E402
from orchestrator.store.artifacts import Store  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
KEY = SecretKey.generate("team-h")
WRITER = Credentials(user=USER, password=PASSWORD)
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
SHA = "b" * 64

Doc = dict


def _artifact(root: Path) -> Path:
    """A small artifact as a build would stage it: files, an executable, a symlink."""
    (root / "prefix" / "lib").mkdir(parents=True)
    (root / "prefix" / "bin").mkdir()
    (root / "meta").mkdir()
    (root / "prefix" / "lib" / "liba.so").write_bytes(os.urandom(3000) + b"\0" * 200_000)
    (root / "prefix" / "bin" / "tool").write_text("#!/bin/sh\necho tool\n")
    os.chmod(root / "prefix" / "bin" / "tool", 0o755)
    (root / "prefix" / "lib" / "liba.so.1").symlink_to("liba.so")
    (root / "meta" / "build.log").write_text("ok\n")
    return root


def _rename(doc: Doc, recipe: str | None = None, variant: str | None = None) -> None:
    m = doc["manifest"]
    m["recipe"] = recipe if recipe is not None else m["recipe"]
    m["variant"] = variant if variant is not None else m["variant"]
    doc["name"] = f"{doc['id']}-{m['recipe']}-{m['variant']}"


def _add(entry: dict) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        doc["manifest"]["files"].append(entry)
    return mutate


def _file(path: str) -> dict:
    return {"path": path, "kind": "file", "size": 4, "mode": 0o644, "sha256": SHA, "target": None}


def _link(path: str, target: str) -> dict:
    return {"path": path, "kind": "symlink", "size": 0, "mode": 0o777, "sha256": None,
            "target": target}


def _nested(doc: Doc) -> None:
    deep: dict = {}
    for _ in range(200):
        deep = {"d": deep}
    doc["manifest"]["derivation"]["deep"] = deep


# name -> (mutation of a valid record, fragment of the refusal, raw blob tampering?)
CASES: dict[str, tuple[Callable[[Doc], None], str]] = {
    "component-over-255": (_add(_file("prefix/" + "a" * 300)), "component over 255"),
    "path-over-path-max": (_add(_file("prefix/" + "/".join(["d" * 200] * 25))), "path is"),
    "file-and-dir": (_add(_file("prefix/lib/liba.so/b")), "lies below the file"),
    "file-and-dir-reversed": (lambda d: d["manifest"]["files"].insert(0, _file("meta/build.log/x")),
                              "lies below the file"),
    "duplicate": (_add(_file("meta/build.log")), "duplicate path"),
    "symlink-nul": (_add(_link("prefix/lib/x", "liba\0.so")), "NUL or control"),
    "symlink-long": (_add(_link("prefix/lib/x", "a/" * 2100)), "longer than the kernel"),
    "symlink-outside": (_add(_link("prefix/lib/x", "../../../etc")), "escapes the artifact"),
    "symlink-absolute": (_add(_link("prefix/lib/x", "/etc/passwd")), "escapes the artifact"),
    "path-control": (_add(_file("prefix/\x1b[31mred")), "control character"),
    "path-newline": (_add(_file("prefix/a\nerror: forged")), "control character"),
    "recipe-slash": (lambda d: _rename(d, recipe="de/mo"), "recipe name"),
    "recipe-space": (lambda d: _rename(d, recipe="Evil Name"), "recipe name"),
    "recipe-dotdot": (lambda d: _rename(d, recipe=".."), "recipe name"),
    "recipe-long": (lambda d: _rename(d, recipe="r" * 300), "recipe name"),
    "variant-newline": (lambda d: _rename(d, variant="release\nerror: forged line"), "variant name"),
    "variant-escape": (lambda d: _rename(d, variant="\x1b]0;owned\x07"), "variant name"),
    "variant-empty": (lambda d: _rename(d, variant=""), "variant name"),
    "deep-derivation": (_nested, "nested deeper"),
}
# truncated-blob: the blob is the whole zstd of half the content
RAW_CASES = {"truncated-blob": "content hash mismatch", "not-json": "not valid JSON",
             "deep-json": "not valid JSON"}


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _artifact(tmp_path_factory.mktemp("hostile") / "art")


@pytest.fixture(params=["file", "http", "oci"])
def cache_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "oci":
        server: RegistryServer = request.getfixturevalue("registry")
        name = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")
        return server.url(f"hostile/{name}")
    if request.param == "http":
        server: NginxServer = request.getfixturevalue("nginx")
        return server.url("cache") + f"hostile-{request.node.name.split('[')[-1].strip(']')}/"
    (tmp_path / "shared").mkdir()
    return f"file://{tmp_path / 'shared'}/"


def _config(url: str) -> CacheConfig:
    return CacheConfig(substituters=[url], trusted_keys=[KEY.public.line()], jobs=2, timeout=5)


def publish(url: str, artifact: Path, case: str) -> tuple[str, str]:
    """Upload the artifact's blobs and a signed record for it (mutated per `case`);
    returns (artifact id, display name)."""
    derivation = {"schema": 1, "case": case}
    manifest = Manifest(id=digest_of(derivation)[:40], recipe="demo", variant="release",
                        derivation=derivation, files=Manifest.scan_files(artifact))
    doc = CacheRecord.for_manifest(manifest).payload()
    backend = open_backend(url, _config(url), WRITER)
    try:
        blobs = [(f.sha256, f.size, artifact / f.path) for f in manifest.files if f.kind == "file"]
        upload_blobs(backend, blobs, 2, "push", TransferStats())
        if case in CASES:
            CASES[case][0](doc)
            if "deep" in doc["manifest"]["derivation"]:
                doc["id"] = digest_of(doc["manifest"]["derivation"])[:40]
                doc["manifest"]["id"] = doc["id"]
                doc["summary"]["derivation_sha256"] = digest_of(doc["manifest"]["derivation"])
                _rename(doc)
        if case == "truncated-blob":
            big = max((f for f in manifest.files if f.kind == "file"), key=lambda f: f.size)
            data = (artifact / big.path).read_bytes()
            half = zstandard.ZstdCompressor().compress(data[: len(data) // 2])
            backend.put(blob_key(big.sha256), lambda: [half])
        signed = {**doc, "signature": KEY.sign(doc)}
        raw = json.dumps(signed).encode()
        if case == "not-json":
            raw = raw[:-10]
        elif case == "deep-json":
            raw = b"[" * 100_000 + b"]" * 100_000
        backend.put(record_key(doc["id"]), lambda: [raw])
    finally:
        backend.close()
    return doc["id"], doc["name"]


def store_is_untouched(root: Path) -> bool:
    store = Store(root)
    return store.artifacts() == [] and not any(store.tmp_dir.iterdir()) if store.tmp_dir.is_dir() \
        else store.artifacts() == []


ALL = sorted(CASES) + sorted(RAW_CASES)


@pytest.mark.parametrize("case", ALL)
def test_hostile_record_is_refused_once(case: str, cache_url: str, artifact: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    fragment = CASES[case][1] if case in CASES else RAW_CASES[case]
    artifact_id, _ = publish(cache_url, artifact, case)
    root = tmp_path / "store"
    with pytest.raises(CacheError) as err:
        pull(Store(root), artifact_id, _config(cache_url))
    message = str(err.value)
    assert fragment in message, message
    assert not CONTROL.search(message) and "\n" not in message, repr(message)
    assert capsys.readouterr().err == ""  # the one refusal is printed by whoever reports it
    assert store_is_untouched(root)


class _PlanRef:
    """The two plan fields substitute() reads."""

    def __init__(self, artifact_id: str, name: str) -> None:
        self.artifact_id, self.name = artifact_id, name


@pytest.mark.parametrize("case", ["file-and-dir", "variant-newline", "truncated-blob", "deep-json",
                                  "component-over-255", "symlink-nul"])
def test_bad_substituter_never_stops_a_build(case: str, cache_url: str, artifact: Path,
                                             tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    artifact_id, _ = publish(cache_url, artifact, case)
    name = f"{artifact_id}-demo-release"  # the local plan's name, never the record's
    cfg = tmp_path / "cache.toml"
    cfg.write_text(f"[cache]\nsubstituters = [{json.dumps(cache_url)}]\n"
                   f"trusted-keys = [{json.dumps(KEY.public.line())}]\ntimeout = 5\n")
    monkeypatch.setenv("ORCH_CACHE_CONFIG", str(cfg))
    root = tmp_path / "store"
    settings = Settings.from_vars(REPO, {"store": str(root)})
    assert substitute(settings, _PlanRef(artifact_id, name), Store(root)) is None
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "warning:" in lines[0] and "building" in lines[0], err
    assert not CONTROL.search(err.replace("\n", ""))
    assert store_is_untouched(root)


def test_good_record_still_pulls(cache_url: str, artifact: Path, tmp_path: Path) -> None:
    artifact_id, name = publish(cache_url, artifact, "good")
    path, _ = pull(Store(tmp_path / "store"), artifact_id, _config(cache_url))
    assert path.name == name
    assert os.readlink(path / "prefix" / "lib" / "liba.so.1") == "liba.so"
    assert hashlib.sha256((path / "prefix/lib/liba.so").read_bytes()).digest() == \
        hashlib.sha256((artifact / "prefix/lib/liba.so").read_bytes()).digest()


@pytest.mark.parametrize("case", ["variant-newline", "truncated-blob"])
def test_doit_pull_prints_one_line(case: str, nginx: NginxServer, artifact: Path,  # noqa: F811
                                   tmp_path: Path) -> None:
    url = nginx.url("cache") + f"hostile-cli-{case}/"
    artifact_id, _ = publish(url, artifact, case)
    cfg = tmp_path / "cache.toml"
    cfg.write_text(f"[cache]\nsubstituters = [{json.dumps(url)}]\n"
                   f"trusted-keys = [{json.dumps(KEY.public.line())}]\ntimeout = 5\n")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ORCH_")},
           "ORCH_CACHE_CONFIG": str(cfg), "ORCH_NO_PROGRESS": "1"}
    p = subprocess.run([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), "pull",
                        f"store={tmp_path / 'store'}", f"id={artifact_id}"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), p.stderr
    assert not CONTROL.search(p.stderr.replace("\n", ""))
