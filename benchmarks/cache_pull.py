"""Benchmark: pull a large artifact from nginx on loopback vs `curl | zstd -d` of the same blobs.

The artifact is the torch 2.13.0 wheel's torch/lib/ directory (`pip download torch==2.13.0
--no-deps`, or --wheel PATH), committed to a scratch store, pushed signed to a real nginx
(tests/nginx/nginx.conf) on 127.0.0.1, then pulled into empty stores. The baseline moves the
very same compressed blobs with curl piped into zstd -d (sequential, and 4 at a time), in the
same run. Then one file changes and a delta pull shows what goes over the wire.

    .venv/bin/python benchmarks/cache_pull.py [--wheel PATH] [--rounds N] [--jobs N]

Goal: pull throughput >= 0.9 of the best baseline. Needs nginx, curl and zstd on PATH.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "nginx"))

from nginx_server import NginxServer  # noqa: E402

from orchestrator.cache.backend import blob_key  # noqa: E402
from orchestrator.cache.cache_toml import CacheConfig  # noqa: E402
from orchestrator.cache.pull import pull  # noqa: E402
from orchestrator.cache.push import push_many  # noqa: E402
from orchestrator.cache.signing import SecretKey  # noqa: E402
from orchestrator.cache.transfer import TransferStats  # noqa: E402
from orchestrator.fs import remove_tree  # noqa: E402
from orchestrator.hashing import digest_of, sha256_file  # noqa: E402
from orchestrator.model.manifest import Manifest  # noqa: E402
from orchestrator.store import Store  # noqa: E402

GOAL = 0.9


def find_wheel(work: Path, given: str | None) -> Path:
    if given:
        return Path(given)
    dest = work / "wheel"
    found = sorted(dest.glob("torch-2.13.0*.whl")) if dest.is_dir() else []
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "torch==2.13.0", "--no-deps",
                        "-d", str(dest), "-q"], check=True)
        found = sorted(dest.glob("torch-2.13.0*.whl"))
    return found[0]


def make_artifact(store: Store, wheel: Path, tag: str, tweak: bool = False) -> Path:
    """Commit the wheel's torch/lib/ as a test artifact (prefix/lib/...)."""
    prefix = "torch/lib/"
    derivation = {"benchmark": "cache_pull", "wheel": wheel.name, "tree": prefix,
                  "wheel_sha256": sha256_file(wheel), "tag": tag}
    artifact_id = digest_of(derivation)[:40]
    if (found := store.find(artifact_id)) is not None:
        return found
    with store.staging("bench") as stage:
        with zipfile.ZipFile(wheel) as z:
            for info in z.infolist():
                if info.filename.startswith(prefix) and not info.is_dir():
                    out = stage / "prefix" / "lib" / info.filename[len(prefix):]
                    out.parent.mkdir(parents=True, exist_ok=True)
                    with z.open(info) as src, open(out, "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
                    if (info.external_attr >> 16) & 0o111:
                        out.chmod(0o755)
        if tweak:  # the one-file change of the delta pull
            f = stage / "prefix" / "lib" / "libshm.so"
            f.write_bytes(f.read_bytes() + b"\0delta\0")
        manifest = Manifest(id=artifact_id, recipe="torchlib", variant=tag, derivation=derivation,
                            files=Manifest.scan_files(stage), origin={"kind": "benchmark"})
        return store.commit(stage, manifest)


def cpu_seconds() -> float:
    """User + system CPU of this process and its finished children (curl, zstd)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def baseline(base_url: str, blobs: list[tuple[str, int]], out: Path,
             parallel: int) -> tuple[float, float]:
    """(seconds, CPU seconds) for curl | zstd -d of every blob into `out`, N at a time."""
    remove_tree(out)
    out.mkdir(parents=True)
    lines = "".join(f"{base_url}{blob_key(sha)} {out / sha}\n" for sha, _ in blobs)
    cpu, start = cpu_seconds(), time.monotonic()
    subprocess.run(["xargs", "-P", str(parallel), "-n", "2", "sh", "-c",
                    'curl -sSf "$0" | zstd -d -q -o "$1"'], input=lines, text=True, check=True)
    return time.monotonic() - start, cpu_seconds() - cpu


def our_pull(artifact_id: str, config: CacheConfig, store_root: Path) -> tuple[float, float]:
    """(seconds, CPU seconds) for a pull into an empty store."""
    remove_tree(store_root)
    cpu, start = cpu_seconds(), time.monotonic()
    got = pull(Store(store_root), artifact_id, config, stats=TransferStats())
    assert got is not None
    return time.monotonic() - start, cpu_seconds() - cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", help="torch 2.13.0 wheel (default: pip download)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--work", help="scratch dir (default: a temp dir, removed at the end)")
    args = ap.parse_args()
    os.environ["ORCH_NO_PROGRESS"] = "1"
    for tool in ("nginx", "curl", "zstd"):
        if not shutil.which(tool) and not Path(f"/usr/sbin/{tool}").exists():
            print(f"error: {tool} not found on PATH", file=sys.stderr)
            return 2
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="orch-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    server = NginxServer(work / "nginx").start()
    try:
        wheel = find_wheel(work, args.wheel)
        store_a = Store(work / "A").ensure()
        art = make_artifact(store_a, wheel, "base")
        manifest = Store.read_manifest(art)
        size = manifest.total_size()
        key = SecretKey.generate("bench")
        url = server.url("open")
        config = CacheConfig(substituters=[url], trusted_keys=[key.public.line()], jobs=args.jobs,
                             timeout=60)
        t0 = time.monotonic()
        push_stats = TransferStats()
        push_many([art], config, key, stats=push_stats)
        push_s = time.monotonic() - t0
        blobs = [(sha, f.size) for sha, f in
                 {f.sha256: f for f in manifest.files if f.kind == "file"}.items()]
        wire = sum((server.root / 'open' / blob_key(sha)).stat().st_size for sha, _ in blobs)

        seq: list[tuple[float, float]] = []
        par: list[tuple[float, float]] = []
        ours: list[tuple[float, float]] = []
        for _ in range(args.rounds):  # interleaved, so load from elsewhere hits all alike
            seq.append(baseline(url, blobs, work / "curl-out", 1))
            par.append(baseline(url, blobs, work / "curl-out", args.jobs))
            ours.append(our_pull(manifest.id, config, work / "B"))
        remove_tree(work / "curl-out")

        # One-file delta: B holds the base artifact; the new one differs in one file.
        art2 = make_artifact(store_a, wheel, "delta", tweak=True)
        push_many([art2], config, key)
        delta = TransferStats()
        pull(Store(work / "B"), Store.read_manifest(art2).id, config, stats=delta)

        def med(runs: list[tuple[float, float]], i: int = 0) -> float:
            return statistics.median(r[i] for r in runs)

        def mbps(runs: list[tuple[float, float]]) -> float:
            return size / med(runs) / 1e6

        ratio_seq = mbps(ours) / mbps(seq)
        ratio_best = mbps(ours) / max(mbps(seq), mbps(par))
        load = os.getloadavg()[0]
        print(f"\ncache_pull: {wheel.name} torch/lib/ "
              f"as one artifact: {len(manifest.files)} files, {size / 1e6:.0f} MB "
              f"({wire / 1e6:.0f} MB zstd), nginx on 127.0.0.1, {args.rounds} rounds (median), "
              f"{os.cpu_count()} cores, load average {load:.1f}")
        rows = [
            ("curl | zstd -d, one blob at a time (baseline)", seq),
            (f"curl | zstd -d, {args.jobs} at a time", par),
            (f"orchestrator pull (jobs={args.jobs}, sha256-checked, committed)", ours),
        ]
        print(f"{'method':<58} {'seconds':>8} {'MB/s':>8} {'CPU s':>8}")
        for name, runs in rows:
            print(f"{name:<58} {med(runs):>8.2f} {mbps(runs):>8.0f} {med(runs, 1):>8.2f}")
        for label, ratio in (("ratio: pull / baseline", ratio_seq),
                             ("ratio: pull / best of both curl runs", ratio_best)):
            print(f"{label + ' (goal >= %.1f)' % GOAL:<58} {'':>8} {ratio:>8.2f}"
                  f"  {'OK' if ratio >= GOAL else 'BELOW GOAL'}")
        if push_stats.blobs_uploaded:
            print(f"{'push (zstd -3 + PUT, first time)':<58} {push_s:>8.2f} "
                  f"{size / push_s / 1e6:>8.0f}")
        print(f"\none-file delta pull: {delta.bytes_downloaded / 1e3:.1f} kB over the wire "
              f"({delta.blobs_downloaded} blob), {delta.files_linked} files hard-linked locally; "
              f"artifact {size / 1e6:.0f} MB -> {delta.bytes_downloaded / size:.6%} moved")
        print(json.dumps({"pull_s": med(ours), "curl_seq_s": med(seq), "curl_par_s": med(par),
                          "files": len(manifest.files), "mb": size / 1e6,
                          "ratio_seq": ratio_seq, "ratio_best": ratio_best}))
        return 0
    finally:
        server.stop()
        if not args.work:
            remove_tree(work)


if __name__ == "__main__":
    sys.exit(main())
