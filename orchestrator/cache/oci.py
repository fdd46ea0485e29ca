"""`oci://host[:port]/repo` backend: the team cache in an OCI registry (distribution API).

The cache keys map onto the registry as cache/oci_manifest.py describes: records are
manifests (config = the signed record, layers = the blobs it names), `packs/<sha>` are blobs
`sha256:<sha>`, `cas/<sha>` blobs are found through a `cas-<sha>` pointer manifest, and so
are write probes `checks/<name>` (`checks-<name>`, never remembered: a probe is read back
from the registry). Blobs
are shared by every artifact and toolchain of the repository: HEAD (or the pointer) first,
uploaded once per digest (cache/oci_upload.py). A pull reads the record's manifest first,
so its layers say where each blob is without one more request per blob.

The same guarantees as http.py: every operation under a Deadline, records and manifests
checked against their digests and sizes, blob contents by their sha256 while they stream
(blob_download, pack_download), hostile manifests refused with one line.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Iterator

import requests
import urllib3

from orchestrator.cache.backend import CHUNK, RECORD_LIMIT, Body, window
from orchestrator.cache.cache_toml import CacheConfig, Credentials
from orchestrator.cache.deadline import Deadline, blob_deadline
from orchestrator.cache.errors import CacheError, TransferInterrupted
from orchestrator.cache.http import PUT_ATTEMPTS, forget_pooled, unreachable_reason
from orchestrator.cache.oci_client import RegistryClient
from orchestrator.cache.oci_manifest import (
    CAS_MEDIA,
    CHECK_KEY_RE,
    EMPTY_CONFIG,
    EMPTY_DIGEST,
    EMPTY_MEDIA,
    KEY_ANNOTATION,
    LAYER_KEY_RE,
    MANIFEST_LIMIT,
    OCI_MANIFEST,
    PACK_MEDIA,
    RECORD_KEY_RE,
    RECORD_MEDIA,
    TOOLCHAIN_MEDIA,
    check_tag,
    descriptor,
    manifest_bytes,
    parse_manifest,
    people_tag,
    pointer_tag,
    record_tag,
    referenced_keys,
)
from orchestrator.cache.oci_upload import upload_blob


class OciBackend:
    def __init__(self, url: str, config: CacheConfig, creds: Credentials) -> None:
        self.client = RegistryClient(url, config, creds)
        self.url = self.client.url
        self.deadline_s = config.timeout
        self._known: dict[str, dict] = {}   # blob key -> layer descriptor
        self._lock = threading.Lock()
        self._empty_there = False
        self._empty_lock = threading.Lock()

    def _deadline(self, verb: str, key: str, size: int = 0) -> Deadline:
        return Deadline(blob_deadline(self.deadline_s, size), f"cache {self.url}: {verb} {key}")

    # -- reading -------------------------------------------------------------------------

    def _read(self, r: requests.Response, limit: int, what: str) -> bytes:
        data = bytearray()
        try:
            for chunk in r.raw.stream(CHUNK, decode_content=True):
                data += chunk
                if len(data) > limit:
                    raise CacheError(f"refused {self.url}{what}: larger than {limit} bytes")
        except (urllib3.exceptions.HTTPError, requests.RequestException) as e:
            raise CacheError(f"cache {self.url}: transfer of {what} was cut short "
                             f"({unreachable_reason(e)})") from None
        return bytes(data)

    def _manifest(self, tag: str, key: str) -> bytes | None:
        """The manifest tagged `tag` (checked against the digest the registry names), or None."""
        what = f"{key} (manifest {tag})"
        with self.client.send("GET", f"{self.client.api}manifests/{tag}", what,
                              headers={"Accept": OCI_MANIFEST}) as r:
            if r.status_code == 404:
                return None
            if r.status_code != 200:
                raise self.client.refused("GET", what, r)
            declared = r.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > MANIFEST_LIMIT:
                raise CacheError(f"refused {self.url}{what}: the manifest is {declared} bytes, "
                                 f"more than {MANIFEST_LIMIT}")
            raw = self._read(r, MANIFEST_LIMIT, what)
            digest = r.headers.get("Docker-Content-Digest", "")
        if digest.startswith("sha256:") and digest != "sha256:" + hashlib.sha256(raw).hexdigest():
            raise CacheError(f"refused {self.url}{what}: its bytes do not match the digest "
                             f"{digest[:80]} the registry names")
        return raw

    def _blob_bytes(self, layer: dict, limit: int, what: str) -> bytes:
        """A small blob (a record), checked against its descriptor's size and digest."""
        if layer["size"] > limit:
            raise CacheError(f"refused {self.url}{what}: {layer['size']} bytes, more than {limit}")
        with self.client.send("GET", f"{self.client.api}blobs/{layer['digest']}", what,
                              blob=True) as r:
            if r.status_code == 404:
                raise CacheError(f"cache {self.url}: {what} names blob {layer['digest']}, "
                                 "which is missing (garbage-collected?)")
            if r.status_code != 200:
                raise self.client.refused("GET", what, r)
            data = self._read(r, limit, what)
        if len(data) != layer["size"] or \
                "sha256:" + hashlib.sha256(data).hexdigest() != layer["digest"]:
            raise CacheError(f"refused {self.url}{what}: blob {layer['digest'][:23]}… does not "
                             f"match its digest or size ({len(data)} bytes)")
        return data

    def _resolve(self, key: str) -> dict | None:
        """The descriptor of blob `key` in this repository, or None when it is not there."""
        with self._lock:
            if key in self._known:
                return self._known[key]
        probe = CHECK_KEY_RE.match(key)
        if probe:
            return self._pointed(check_tag(probe.group(1)), key)
        m = LAYER_KEY_RE.match(key)
        if not m:
            raise CacheError(f"oci:// caches hold no {key[:100]!r}")
        if m.group(1) == "packs":
            digest = f"sha256:{m.group(2)}"
            with self.client.send("HEAD", f"{self.client.api}blobs/{digest}", key) as r:
                if r.status_code == 404:
                    return None
                if r.status_code != 200:
                    raise self.client.refused("HEAD", key, r)
                size = int(r.headers.get("Content-Length", "0") or 0)
            found = descriptor(PACK_MEDIA, digest, size, key)
        else:
            found = self._pointed(pointer_tag(m.group(2)), key)
            if found is None:
                return None
        with self._lock:
            self._known[key] = found
        return found

    def _pointed(self, tag: str, key: str) -> dict | None:
        """The one blob a pointer manifest `tag` names for `key`, or None when there is none."""
        raw = self._manifest(tag, key)
        if raw is None:
            return None
        pointer = parse_manifest(raw, f"{self.url}{key}", key)
        if len(pointer.layers) != 1 or pointer.layers[0].annotations.get(KEY_ANNOTATION) != key:
            raise CacheError(f"refused {self.url}{key}: its pointer names "
                             f"{len(pointer.layers)} blobs, not this one")
        return pointer.layers[0].model_dump(mode="json")

    def exists(self, key: str) -> bool:
        with self._deadline("HEAD", key):
            if not RECORD_KEY_RE.match(key):
                return self._resolve(key) is not None
            tag = record_tag(key)
            with self.client.send("HEAD", f"{self.client.api}manifests/{tag}", key,
                                  headers={"Accept": OCI_MANIFEST}) as r:
                if r.status_code in (200, 404):
                    return r.status_code == 200
                raise self.client.refused("HEAD", key, r)

    def get(self, key: str, limit: int = RECORD_LIMIT) -> bytes | None:
        with self._deadline("GET", key):
            if CHECK_KEY_RE.match(key):
                layer = self._resolve(key)
                return None if layer is None else self._blob_bytes(layer, limit, key)
            raw = self._manifest(record_tag(key), key)
            if raw is None:
                return None
            where = f"{self.url}{key}"
            manifest = parse_manifest(raw, where, key)
            wanted = RECORD_MEDIA if key.startswith("ac/") else TOOLCHAIN_MEDIA
            if manifest.config.mediaType != wanted:
                raise CacheError(f"refused {where}: its config is "
                                 f"{manifest.config.mediaType[:100]!r}, not {wanted}")
            data = self._blob_bytes(manifest.config.model_dump(), limit, key)
            with self._lock:
                for layer in manifest.layers:
                    self._known[layer.annotations[KEY_ANNOTATION]] = \
                        layer.model_dump(mode="json")
            return data

    @contextlib.contextmanager
    def stream(self, key: str, size: int = 0, start: int = 0,
               length: int | None = None) -> Iterator[Iterator[bytes]]:
        with self._deadline("GET", key, size):
            layer = self._resolve(key)
            if layer is None:
                raise CacheError(f"cache {self.url}: {key} is missing (incomplete cache?)")
            with self._stream(layer["digest"], key, start, length) as chunks:
                yield chunks

    @contextlib.contextmanager
    def _stream(self, digest: str, key: str, start: int,
                length: int | None) -> Iterator[Iterator[bytes]]:
        ranged = start > 0 or length is not None
        last = "" if length is None else str(start + length - 1)
        headers = {"Range": f"bytes={start}-{last}"} if ranged else None
        with self.client.send("GET", f"{self.client.api}blobs/{digest}", key, headers=headers,
                              blob=True) as r:
            if r.status_code == 404:
                raise CacheError(f"cache {self.url}: {key} is missing (blob {digest[:23]}…; "
                                 "garbage-collected?)")
            if ranged and r.status_code == 416:
                yield iter(())
                return
            skip = start
            if ranged and r.status_code == 206:
                answered = r.headers.get("Content-Range", "")
                if not answered.startswith(f"bytes {start}-"):
                    raise CacheError(f"refused {self.url}{key}: asked for bytes {start}-{last}, "
                                     f"the registry sent {answered[:80]!r}")
                skip = 0
            elif r.status_code != 200:
                raise self.client.refused("GET", key, r)
            try:
                yield window(r.raw.stream(CHUNK, decode_content=False), skip, length)
            except (urllib3.exceptions.HTTPError, requests.RequestException) as e:
                raise TransferInterrupted(f"cache {self.url}: transfer of {key} was cut short "
                                          f"({unreachable_reason(e)})") from None

    # -- writing -------------------------------------------------------------------------

    def put(self, key: str, body: Body, size: int = 0) -> int:
        with self._deadline("PUT", key, size * PUT_ATTEMPTS):
            if RECORD_KEY_RE.match(key):
                return self._put_record(key, b"".join(body()))
            probe = CHECK_KEY_RE.match(key)
            if probe:
                digest, sent = upload_blob(self.client, body, key, None)
                self._put_pointer(check_tag(probe.group(1)),
                                  descriptor(CAS_MEDIA, digest, sent, key), key)
                return sent
            m = LAYER_KEY_RE.match(key)
            if not m:
                raise CacheError(f"oci:// caches hold no {key[:100]!r}")
            packs = m.group(1) == "packs"
            digest, sent = upload_blob(self.client, body, key,
                                       f"sha256:{m.group(2)}" if packs else None)
            layer = descriptor(PACK_MEDIA if packs else CAS_MEDIA, digest, sent, key)
            if not packs:
                self._put_pointer(pointer_tag(m.group(2)), layer, key)
            with self._lock:
                self._known[key] = layer
            return sent

    def _put_pointer(self, tag: str, layer: dict, key: str) -> None:
        """The pointer manifest `tag` naming one blob (`layer`) for `key` (what _pointed reads)."""
        self._ensure_empty()
        self._put_manifest(tag, manifest_bytes(descriptor(EMPTY_MEDIA, EMPTY_DIGEST, 2),
                                               [layer], key), key)

    def _ensure_empty(self) -> None:
        """The `{}` config of pointers, uploaded once (two concurrent uploads of one digest
        made distribution 2.8 refuse a manifest naming it: DIGEST_INVALID)."""
        with self._empty_lock:
            if self._empty_there:
                return
            with self.client.send("HEAD", f"{self.client.api}blobs/{EMPTY_DIGEST}", "{}") as r:
                there = r.status_code == 200
            if not there:
                upload_blob(self.client, lambda: [EMPTY_CONFIG], "the empty config",
                            EMPTY_DIGEST)
            self._empty_there = True

    def _put_manifest(self, tag: str, data: bytes, key: str) -> None:
        what = f"{key} (manifest {tag})"
        with self.client.send("PUT", f"{self.client.api}manifests/{tag}", what, data=data,
                              headers={"Content-Type": OCI_MANIFEST}) as r:
            if r.status_code != 201:
                raise self.client.refused("PUT", what, r)

    def _put_record(self, key: str, raw: bytes) -> int:
        """The record as the config of a manifest whose layers are the blobs it names."""
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):
            doc = None  # pushed as it is; every puller refuses it
        layers = [d for k in referenced_keys(key, doc) if (d := self._resolve(k)) is not None]
        digest = f"sha256:{hashlib.sha256(raw).hexdigest()}"
        upload_blob(self.client, lambda: [raw], key, digest)
        media = RECORD_MEDIA if key.startswith("ac/") else TOOLCHAIN_MEDIA
        manifest = manifest_bytes(descriptor(media, digest, len(raw)), layers, key)
        if len(manifest) > MANIFEST_LIMIT:
            raise CacheError(f"push to {self.url} refused: the manifest of {key} would be "
                             f"{len(manifest)} bytes (at most {MANIFEST_LIMIT}); too many blobs")
        self._put_manifest(record_tag(key), manifest, key)
        if (tag := people_tag(key, doc)) is not None:
            self._put_manifest(tag, manifest, key)
        return len(raw)

    def forget_connections(self) -> None:
        forget_pooled(self.client.session)

    def close(self) -> None:
        self.client.close()
