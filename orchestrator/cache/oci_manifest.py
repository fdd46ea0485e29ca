"""What an `oci://` cache keeps in the registry: manifests, tags and their checks.

- A record (`ac/<id>.json`, `tc/<hash>.json`) is an OCI image manifest whose config blob is
  the signed record's bytes (media type RECORD_MEDIA / TOOLCHAIN_MEDIA) and whose layers are
  the blobs the record names, each annotated with its cache key (KEY_ANNOTATION: `cas/<sha>`
  or `packs/<sha>`). Tag: `ac-<id>` / `tc-<hash>`; a second tag names it for people:
  `<recipe>--<variant>--<id first 12>` (`toolchain--<lock>--<hash first 12>`).
- A `packs/<sha>` blob is the registry blob `sha256:<sha>` (a pack's name is its bytes' hash).
- A `cas/<sha>` blob is zstd-compressed, so its registry digest is not `<sha>`: a small
  pointer manifest tagged `cas-<sha>` (config: the empty `{}` blob, one layer) says which
  digest holds it, so a HEAD finds it before upload and a garbage-collect keeps it.
Tags use the OCI charset `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`: any other character of a
recipe, variant or lock name becomes `_`, and each part is cut to 40 characters.
"""
from __future__ import annotations

import json
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator.cache.errors import CacheError

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
RECORD_MEDIA = "application/vnd.orchestrator.cache-record.v1+json"
TOOLCHAIN_MEDIA = "application/vnd.orchestrator.toolchain-record.v1+json"
EMPTY_MEDIA = "application/vnd.oci.empty.v1+json"
EMPTY_CONFIG = b"{}"
EMPTY_DIGEST = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
CAS_MEDIA = "application/vnd.orchestrator.cas.v1+zstd"
PACK_MEDIA = "application/vnd.orchestrator.pack.v1+zstd"
KEY_ANNOTATION = "org.orchestrator.cache.key"
MANIFEST_LIMIT = 4 << 20      # bytes of one manifest (distribution's own limit on a PUT)
MAX_LAYERS = 200_000
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
LAYER_KEY_RE = re.compile(r"^(cas|packs)/([0-9a-f]{64})$")
RECORD_KEY_RE = re.compile(r"^(ac|tc)/([0-9a-f]{32}|[0-9a-f]{40})\.json$")
CHECK_KEY_RE = re.compile(r"^checks/([A-Za-z0-9_.-]{1,100})$")  # write probes (backend.probe_key)
_TAG_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


class Descriptor(BaseModel):
    model_config = ConfigDict(extra="ignore")
    mediaType: str = Field(max_length=255)  # noqa: N815 - the OCI field name
    digest: str = Field(pattern=DIGEST_RE.pattern)
    size: int = Field(ge=0, le=1 << 40)
    annotations: dict[str, str] = {}


class ImageManifest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    schemaVersion: Literal[2]  # noqa: N815
    mediaType: Literal["application/vnd.oci.image.manifest.v1+json"] = OCI_MANIFEST  # noqa: N815
    config: Descriptor
    layers: list[Descriptor] = Field(max_length=MAX_LAYERS)
    annotations: dict[str, str] = {}


def tag_part(text: str) -> str:
    return _TAG_UNSAFE.sub("_", text)[:40] or "_"


def record_tag(key: str) -> str:
    """The lookup tag of a record key: `ac/<id>.json` -> `ac-<id>`."""
    m = RECORD_KEY_RE.match(key)
    if not m:
        raise CacheError(f"oci:// caches hold no {key[:100]!r}")
    return f"{m.group(1)}-{m.group(2)}"


def pointer_tag(sha256: str) -> str:
    return f"cas-{sha256}"


def check_tag(name: str) -> str:
    """The pointer tag of a write probe `checks/<name>` (a tag is at most 128 characters)."""
    return f"checks-{name}"


def people_tag(key: str, doc: object) -> str | None:
    """The second tag of a record, naming recipe/variant/id (or lock/hash); None if the
    record lacks those fields (it is then refused by pullers anyway)."""
    if not isinstance(doc, dict):
        return None
    kind, _, name = key.partition("/")
    ident = name.removesuffix(".json")[:12]
    manifest = doc.get("manifest")
    if kind == "ac" and isinstance(manifest, dict):
        recipe, variant = manifest.get("recipe"), manifest.get("variant")
        if isinstance(recipe, str) and isinstance(variant, str):
            return f"{tag_part(recipe)}--{tag_part(variant)}--{ident}".lstrip(".-")
    if kind == "tc" and isinstance(doc.get("lock"), str):
        return f"toolchain--{tag_part(doc['lock'])}--{ident}"
    return None


def descriptor(media: str, digest: str, size: int, key: str | None = None) -> dict:
    d: dict = {"mediaType": media, "digest": digest, "size": size}
    if key is not None:
        d["annotations"] = {KEY_ANNOTATION: key}
    return d


def manifest_bytes(config: dict, layers: list[dict], key: str) -> bytes:
    doc = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": config, "layers": layers,
           "annotations": {KEY_ANNOTATION: key}}
    return _json(doc)


def _json(doc: dict) -> bytes:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


def parse_manifest(raw: bytes, where: str, key: str) -> ImageManifest:
    """A manifest from the registry, checked before anything of it is used: shape, digests,
    its own key annotation, and layers whose keys name their digests honestly."""
    try:
        m = ImageManifest.model_validate_json(raw)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise CacheError(f"refused {where}: not an OCI image manifest ({err['msg']} at "
                         f"{loc or 'top'})") from None
    if m.annotations.get(KEY_ANNOTATION) != key:
        raise CacheError(f"refused {where}: the manifest is not the one for {key} "
                         f"(it says {m.annotations.get(KEY_ANNOTATION, 'nothing')[:100]!r})")
    for n, layer in enumerate(m.layers):
        lkey = layer.annotations.get(KEY_ANNOTATION, "")
        lm = LAYER_KEY_RE.match(lkey)
        if not lm and lkey == key and CHECK_KEY_RE.match(key):
            continue  # a write probe's pointer names the probe's own blob
        if not lm:
            raise CacheError(f"refused {where}: layer {n} has no cache key (got {lkey[:100]!r})")
        if lm.group(1) == "packs" and layer.digest != f"sha256:{lm.group(2)}":
            raise CacheError(f"refused {where}: layer {n} says {lkey} but names {layer.digest}")
    return m


def referenced_keys(key: str, doc: object) -> list[str]:
    """The blob keys a record names (packs first, then loose cas/ blobs), read leniently:
    a malformed record names what it can (pullers refuse it by its signature and model)."""
    if not isinstance(doc, dict):
        return []
    keys: list[str] = []
    packed: set[str] = set()
    for pack in doc.get("packs") or []:
        if isinstance(pack, dict) and isinstance(pack.get("sha256"), str):
            keys.append(f"packs/{pack['sha256']}")
            packed |= {m.get("sha256") for m in pack.get("members") or [] if isinstance(m, dict)}
    manifest = doc.get("manifest") if key.startswith("ac/") else doc
    files = manifest.get("files") if isinstance(manifest, dict) else None
    for f in files if isinstance(files, list) else []:
        sha = f.get("sha256") if isinstance(f, dict) and f.get("kind") == "file" else None
        if isinstance(sha, str) and sha not in packed:
            keys.append(f"cas/{sha}")
    return [k for k in dict.fromkeys(keys) if LAYER_KEY_RE.match(k)]
