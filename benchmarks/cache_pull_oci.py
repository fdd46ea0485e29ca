"""Benchmark: push and pull through an OCI registry (oci://) vs nginx (http://), against
curl | zstd -d of the same blobs from the registry, in the same run.

The artifacts are those of benchmarks/cache_pull.py (torch 2.13.0 wheel: `large` = torch/lib/,
16 files, 468 MB; `small` = torch/ without lib/, ~12k files), pushed signed to a real nginx
(tests/nginx) and a real docker-registry (tests/oci) on 127.0.0.1, then pulled into empty
stores, rounds interleaved. Medians with the spread (min-max) beside them.

    .venv/bin/python benchmarks/cache_pull_oci.py [--wheel PATH] [--rounds N] [--jobs N]
        [--set large|small|both]

Needs nginx, docker-registry, curl and zstd.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests" / "oci"))

from cache_pull import (LARGE, SMALL, Runs, TreeSet, curl_blobs, find_wheel,  # noqa: E402
                        make_artifact, med, our_pull)
from nginx_server import NginxServer  # noqa: E402
from registry_server import RegistryServer  # noqa: E402

from orchestrator.cache.backend import record_key  # noqa: E402
from orchestrator.cache.backends import open_backend  # noqa: E402
from orchestrator.cache.cache_toml import CacheConfig  # noqa: E402
from orchestrator.cache.oci_manifest import parse_manifest, record_tag  # noqa: E402
from orchestrator.cache.push import push_many  # noqa: E402
from orchestrator.cache.signing import SecretKey  # noqa: E402
from orchestrator.fs import remove_tree  # noqa: E402
from orchestrator.store.artifacts import Store  # noqa: E402


def spread(runs: Runs) -> str:
    s = [r[0] for r in runs]
    return f"{min(s):.2f}-{max(s):.2f}"


def registry_blobs(url: str, config: CacheConfig, artifact_id: str) -> tuple[str, list[str]]:
    """(blob URL prefix, the digests of the record's layers) from the registry itself."""
    backend = open_backend(url, config)
    try:
        key = record_key(artifact_id)
        raw = backend._manifest(record_tag(key), key)  # noqa: SLF001 - the benchmark reads it
        assert raw is not None
        layers = parse_manifest(raw, url, key).layers
        return backend.client.api + "blobs/", [layer.digest for layer in layers]
    finally:
        backend.close()


def one_set(tree: TreeSet, args: argparse.Namespace, work: Path, wheel: Path, store: Store,
            key: SecretKey, configs: dict[str, CacheConfig]) -> dict[str, float]:
    art = make_artifact(store, wheel, tree, "base")
    manifest = Store.read_manifest(art)
    size = manifest.total_size()
    push_s: dict[str, float] = {}
    for name, config in configs.items():
        t0 = time.monotonic()
        push_many([art], config, key)
        push_s[name] = time.monotonic() - t0
    prefix, digests = registry_blobs(configs["oci"].substituters[0], configs["oci"], manifest.id)
    runs: dict[str, Runs] = {"curl-seq": [], "curl-par": [], "nginx": [], "oci": []}
    for _ in range(args.rounds):  # interleaved: load from elsewhere hits every method alike
        runs["curl-seq"].append(curl_blobs(prefix, digests, work / "curl-out", 1))
        runs["curl-par"].append(curl_blobs(prefix, digests, work / "curl-out", args.jobs))
        for name in ("nginx", "oci"):
            runs[name].append(our_pull(manifest.id, configs[name], work / f"B-{name}"))
        remove_tree(work / "B-nginx")
        remove_tree(work / "B-oci")
    remove_tree(work / "curl-out")
    best = min(med(runs["curl-seq"]), med(runs["curl-par"]))
    print(f"\n{tree.name}: {len(manifest.files)} files, {size / 1e6:.0f} MB, {len(digests)} "
          f"registry blobs, {args.rounds} rounds, load average {os.getloadavg()[0]:.1f}")
    print(f"{'method':<58} {'median s':>9} {'spread s':>12} {'MB/s':>7}")
    rows = (("curl | zstd -d from the registry, one blob at a time", "curl-seq"),
            (f"curl | zstd -d from the registry, {args.jobs} at a time", "curl-par"),
            (f"pull from nginx (http://, jobs={args.jobs})", "nginx"),
            (f"pull from the registry (oci://, jobs={args.jobs})", "oci"))
    for label, name in rows:
        print(f"{label:<58} {med(runs[name]):>9.2f} {spread(runs[name]):>12} "
              f"{size / med(runs[name]) / 1e6:>7.0f}")
    for name in ("nginx", "oci"):
        print(f"{'ratio: ' + name + ' pull / best curl | zstd -d':<58} "
              f"{best / med(runs[name]):>9.2f}")
        print(f"{'push to ' + name + ' (first time)':<58} {push_s[name]:>9.2f}")
    return {f"{tree.name}_{k}_s": med(v) for k, v in runs.items()} | \
        {f"{tree.name}_push_{k}_s": v for k, v in push_s.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", help="torch 2.13.0 wheel (default: pip download)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--set", choices=("large", "small", "both"), default="both")
    args = ap.parse_args()
    os.environ["ORCH_NO_PROGRESS"] = "1"
    work = Path(tempfile.mkdtemp(prefix="orch-bench-oci-"))
    nginx = NginxServer(work / "nginx").start()
    registry = RegistryServer(work / "registry").start()
    try:
        key = SecretKey.generate("bench")
        configs = {name: CacheConfig(substituters=[url], trusted_keys=[key.public.line()],
                                     jobs=args.jobs, timeout=60)
                   for name, url in (("nginx", nginx.url("open")),
                                     ("oci", registry.url("bench/cache")))}
        wheel = find_wheel(work, args.wheel)
        store = Store(work / "A").ensure()
        print(f"cache_pull_oci: nginx and docker-registry on 127.0.0.1, {os.cpu_count()} cores, "
              f"load average {os.getloadavg()[0]:.1f} at the start")
        out: dict[str, float] = {}
        for tree in (LARGE, SMALL):
            if args.set in (tree.name, "both"):
                out |= one_set(tree, args, work, wheel, store, key, configs)
        print(json.dumps(out))
        return 0
    finally:
        registry.close()
        nginx.stop()
        remove_tree(work)


if __name__ == "__main__":
    sys.exit(main())
