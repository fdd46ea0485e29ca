"""Benchmark: push and pull through an OCI registry (oci://) vs nginx (http://), against
curl | zstd -d of the same blobs from the registry, in the same run.

The artifacts are those of benchmarks/cache_pull.py (torch 2.13.0 wheel: `large` = torch/lib/,
16 files, 468 MB; `small` = torch/ without lib/, ~12k files), pushed signed to a real nginx
(tests/nginx) and a real docker-registry (tests/oci) on 127.0.0.1, then pulled into empty
stores, rounds interleaved (each method in each place of a round in turn, each run into a
new directory). Medians with the spread (min-max) beside them, and the ratios the goals of
benchmarks/cache_pull.py name: pull / best curl | zstd -d >= 0.9 (large), pull / curl |
zstd -d | tar -x of the same tree as one archive >= 0.8 (small). Each goal ratio is printed
twice: medians over each other (with the spread of the pull's rounds), and the median of the
rounds' own ratios (each round's baseline over that round's pull, with their min-max), the
figure benchmarks/all.py shows. Beside them: the CPU seconds of each method (this process
and its children; the servers' own CPU not included), the median seconds of a pull's phases
(record fetched and checked / contents downloaded into staging / the store's commit) and
the load average of each round.
On the 2-core dev VM (ext4 without a journal, shared with builds and tests) creating files
costs whatever ext4's recently_deleted() scan costs at that moment: the same tar -x of the
same archive took 0.9-7.0 s within one run; read the spreads before the medians.

    .venv/bin/python benchmarks/cache_pull_oci.py [--wheel PATH] [--rounds N] [--jobs N]
        [--set large|small|both]

Needs nginx, docker-registry, curl, zstd and tar.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests" / "oci"))

from cache_pull import (  # noqa: E402
    GOAL,
    LARGE,
    PHASES,
    SMALL,
    SMALL_GOAL,
    Runs,
    TreeSet,
    curl_blobs,
    curl_tar,
    find_wheel,
    make_artifact,
    med,
    our_pull,
    phases_line,
)
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


def ratios(base: float, runs: Runs) -> str:
    """The spread of a ratio: the baseline's median over each run's seconds."""
    s = [r[0] for r in runs]
    return f"{base / max(s):.2f}-{base / min(s):.2f}"


def paired(base: list[float], runs: Runs) -> list[float]:
    """Each round's own ratio: that round's baseline seconds over that round's pull. The
    methods of one round run back to back, so load from elsewhere (2 shared cores here)
    that comes and goes between rounds hits both sides of a pair alike."""
    return [b / r[0] for b, r in zip(base, runs, strict=True)]


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


def tar_archive(art: Path, nginx: NginxServer) -> str:
    """The small set's tree as one tar.zst (zstd -3) on the nginx: the goal's baseline."""
    archive = nginx.root / "open" / "bench-small.tar.zst"
    subprocess.run(["sh", "-c", f'tar -C "{art}" -cf - prefix | zstd -3 -q -f -o "{archive}"'],
                   check=True)
    return nginx.url("open") + archive.name


def one_set(tree: TreeSet, args: argparse.Namespace, work: Path, wheel: Path, store: Store,
            key: SecretKey, configs: dict[str, CacheConfig], nginx: NginxServer) -> dict[str, float]:
    art = make_artifact(store, wheel, tree, "base")
    manifest = Store.read_manifest(art)
    size = manifest.total_size()
    PHASES.clear()  # this set's pulls only
    push_s: dict[str, float] = {}
    for name, config in configs.items():
        t0 = time.monotonic()
        push_many([art], config, key)
        push_s[name] = time.monotonic() - t0
    prefix, digests = registry_blobs(configs["oci"].substituters[0], configs["oci"], manifest.id)
    runs: dict[str, Runs] = {"curl-seq": [], "curl-par": [], "nginx": [], "oci": []}
    archive_url = ""
    if tree is SMALL:
        archive_url = tar_archive(art, nginx)
        runs["tar"] = []
    # Every run writes into a new directory of its own. The small set's outputs stay until the
    # last round (ext4 is slow to hand out the inodes of files deleted in the last minute:
    # see cache_pull.small_set); the large set's go after each round (2 GB a round). Each
    # method takes each place in a round in turn, so none always follows another's removal.
    rounds_dir = work / "rounds"
    order = list(runs)
    loads: list[float] = []
    for r in range(args.rounds):  # interleaved: load from elsewhere hits every method alike
        for name in order[r % len(order):] + order[:r % len(order)]:
            out = rounds_dir / f"{name}-{r}"
            if name == "tar":
                runs[name].append(curl_tar(archive_url, out))
            elif name.startswith("curl"):
                runs[name].append(curl_blobs(prefix, digests, out,
                                             1 if name == "curl-seq" else args.jobs))
            else:
                runs[name].append(our_pull(manifest.id, configs[name], out))
        loads.append(os.getloadavg()[0])
        if tree is not SMALL:
            remove_tree(rounds_dir)
    remove_tree(rounds_dir)
    best = min(med(runs["curl-seq"]), med(runs["curl-par"]))
    print(f"\n{tree.name}: {len(manifest.files)} files, {size / 1e6:.0f} MB, {len(digests)} "
          f"registry blobs, {args.rounds} rounds, load average {os.getloadavg()[0]:.1f}")
    print(f"{'method':<58} {'median s':>9} {'spread s':>12} {'MB/s':>7} {'CPU s':>6}")
    rows = [("curl | zstd -d from the registry, one blob at a time", "curl-seq"),
            (f"curl | zstd -d from the registry, {args.jobs} at a time", "curl-par"),
            (f"pull from nginx (http://, jobs={args.jobs})", "nginx"),
            (f"pull from the registry (oci://, jobs={args.jobs})", "oci")]
    if archive_url:
        rows.insert(2, ("curl | zstd -d | tar -x, one archive from nginx", "tar"))
    for label, name in rows:
        print(f"{label:<58} {med(runs[name]):>9.2f} {spread(runs[name]):>12} "
              f"{size / med(runs[name]) / 1e6:>7.0f} {med(runs[name], 1):>6.2f}")
    # the goal's baseline: the best curl | zstd -d (large), curl | zstd -d | tar -x (small)
    base, goal, what = (med(runs["tar"]), SMALL_GOAL, "curl | zstd -d | tar -x") if archive_url \
        else (best, GOAL, "best curl | zstd -d")
    per_round = [r[0] for r in runs["tar"]] if archive_url else \
        [min(a[0], b[0]) for a, b in zip(runs["curl-seq"], runs["curl-par"], strict=True)]
    base_cpu = med(runs["tar"], 1) if archive_url else \
        min(med(runs["curl-seq"], 1), med(runs["curl-par"], 1))
    out: dict[str, float] = {}
    for name in ("nginx", "oci"):
        ratio = base / med(runs[name])
        pairs = paired(per_round, runs[name])
        print(f"{'ratio: ' + name + ' pull / ' + what + f' (goal >= {goal})':<58} "
              f"{ratio:>9.2f} {ratios(base, runs[name]):>12}  "
              f"{'OK' if ratio >= goal else 'BELOW GOAL'}")
        print(f"{'  the same, round by round (median, spread)':<58} "
              f"{statistics.median(pairs):>9.2f} {min(pairs):>7.2f}-{max(pairs):.2f}  "
              f"{'OK' if statistics.median(pairs) >= goal else 'BELOW GOAL'}")
        print(f"{'  CPU seconds: baseline / pull (this process, children)':<58} "
              f"{base_cpu / med(runs[name], 1):>9.2f} "
              f"{base_cpu:>5.2f}/{med(runs[name], 1):.2f}")
        print(f"{'  pull phases, median s: record/download/commit':<58} "
              f"{phases_line(configs[name]):>22}")
        print(f"{'push to ' + name + ' (first time)':<58} {push_s[name]:>9.2f}")
        out[f"{tree.name}_paired_ratio_{name}"] = statistics.median(pairs)
        out[f"{tree.name}_paired_ratio_{name}_min"] = min(pairs)
        out[f"{tree.name}_paired_ratio_{name}_max"] = max(pairs)
        out[f"{tree.name}_ratio_{name}_min"] = base / max(r[0] for r in runs[name])
        out[f"{tree.name}_ratio_{name}_max"] = base / min(r[0] for r in runs[name])
    print(f"load average per round: {' '.join(f'{x:.1f}' for x in loads)}")
    return {f"{tree.name}_{k}_s": med(v) for k, v in runs.items()} | \
        {f"{tree.name}_push_{k}_s": v for k, v in push_s.items()} | \
        {f"{tree.name}_ratio_{k}": base / med(runs[k]) for k in ("nginx", "oci")} | out | \
        {f"{tree.name}_load": statistics.median(loads), f"{tree.name}_files": len(manifest.files),
         f"{tree.name}_mb": size / 1e6}


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
                out |= one_set(tree, args, work, wheel, store, key, configs, nginx)
        print(json.dumps(out))
        return 0
    finally:
        registry.close()
        nginx.stop()
        remove_tree(work)


if __name__ == "__main__":
    sys.exit(main())
