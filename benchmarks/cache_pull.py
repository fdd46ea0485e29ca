"""Benchmark: pull artifacts from nginx on loopback vs curl + zstd -d of the same content.

Two artifacts from the torch 2.13.0 wheel (`pip download torch==2.13.0 --no-deps`, or --wheel
PATH), each committed to a scratch store, pushed signed to a real nginx (tests/nginx/nginx.conf)
on 127.0.0.1, then pulled into empty stores, interleaved with their baselines in the same run:

- large: torch/lib/ (16 files, 468 MB). Baseline: the very same compressed objects (blobs,
  and the pack of its few small files) with curl piped into zstd -d (sequential, and 4 at a
  time). Goal: pull throughput >= 0.9 of the best.
- small: torch/ without lib/ (~12k files, 227 MB). Baseline: the same files as one archive,
  `curl | zstd -d | tar -x` (tar.zst at zstd -3, served by the same nginx). Goal >= 0.8.

Then one file of each changes and a delta pull shows what goes over the wire.

    .venv/bin/python benchmarks/cache_pull.py [--wheel PATH] [--rounds N] [--jobs N]
        [--set large|small|both]

Needs nginx, curl, zstd and tar on PATH.
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
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "nginx"))

from nginx_server import NginxServer  # noqa: E402

from orchestrator.cache.backend import blob_key, pack_key, record_key  # noqa: E402
from orchestrator.cache.cache_toml import CacheConfig  # noqa: E402
from orchestrator.cache.pull import pull  # noqa: E402
from orchestrator.cache.push import push_many  # noqa: E402
from orchestrator.cache.signing import SecretKey  # noqa: E402
from orchestrator.cache.transfer import TransferStats  # noqa: E402
from orchestrator.fs import remove_tree  # noqa: E402
from orchestrator.hashing import digest_of, sha256_file  # noqa: E402
from orchestrator.model.manifest import Manifest  # noqa: E402
from orchestrator.store.artifacts import Store  # noqa: E402

GOAL = 0.9
SMALL_GOAL = 0.8
Runs = list[tuple[float, float]]  # (seconds, CPU seconds) per round


@dataclass(frozen=True)
class TreeSet:
    """Which part of the wheel becomes the artifact, where it lands, which file a delta tweaks."""
    name: str
    wheel_prefix: str
    exclude: str | None
    dest: str
    tweak: str


LARGE = TreeSet("large", "torch/lib/", None, "prefix/lib/", "libshm.so")
SMALL = TreeSet("small", "torch/", "torch/lib/", "prefix/python/torch/", "__init__.py")


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


def make_artifact(store: Store, wheel: Path, tree: TreeSet, tag: str,
                  tweak: bool = False) -> Path:
    """Commit part of the wheel as a test artifact (`tree.dest` + the path in the wheel)."""
    derivation = {"benchmark": "cache_pull", "wheel": wheel.name, "tree": tree.wheel_prefix,
                  "exclude": tree.exclude, "wheel_sha256": sha256_file(wheel), "tag": tag}
    artifact_id = digest_of(derivation)[:40]
    if (found := store.find(artifact_id)) is not None:
        return found
    with store.staging("bench") as stage:
        with zipfile.ZipFile(wheel) as z:
            for info in z.infolist():
                name = info.filename
                if (not name.startswith(tree.wheel_prefix) or info.is_dir()
                        or (tree.exclude and name.startswith(tree.exclude))):
                    continue
                out = stage / tree.dest / name[len(tree.wheel_prefix):]
                out.parent.mkdir(parents=True, exist_ok=True)
                with z.open(info) as src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
                if (info.external_attr >> 16) & 0o111:
                    out.chmod(0o755)
        if tweak:  # the one-file change of the delta pull
            f = stage / tree.dest / tree.tweak
            f.write_bytes(f.read_bytes() + b"\n# delta\n")
        manifest = Manifest(id=artifact_id, recipe="torchlib", variant=f"{tree.name}-{tag}",
                            derivation=derivation, files=Manifest.scan_files(stage),
                            origin={"kind": "benchmark"})
        return store.commit(stage, manifest)


def settle() -> None:
    """Write back what earlier rounds left dirty (and the removal of their output) before a
    timed run, so no method pays for another's writeback."""
    os.sync()


def cpu_seconds() -> float:
    """User + system CPU of this process and its finished children (curl, zstd, tar)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def cache_objects(server: NginxServer, artifact_id: str) -> list[str]:
    """The keys a pull of the artifact reads besides its record: its loose blobs and packs."""
    doc = json.loads((server.root / "open" / record_key(artifact_id)).read_text())
    packed = {m["sha256"] for p in doc.get("packs", []) for m in p["members"]}
    loose = {f["sha256"] for f in doc["manifest"]["files"] if f["kind"] == "file"} - packed
    return [blob_key(sha) for sha in sorted(loose)] + \
        [pack_key(p["sha256"]) for p in doc.get("packs", [])]


def curl_blobs(base_url: str, keys: list[str], out: Path, parallel: int) -> tuple[float, float]:
    """(seconds, CPU seconds) for curl | zstd -d of every object into `out`, N at a time (a
    pack, all frames of it, into one file)."""
    remove_tree(out)
    out.mkdir(parents=True)
    lines = "".join(f"{base_url}{key} {out / key.replace('/', '-')}\n" for key in keys)
    settle()
    cpu, start = cpu_seconds(), time.monotonic()
    subprocess.run(["xargs", "-P", str(parallel), "-n", "2", "sh", "-c",
                    'curl -sSf "$0" | zstd -d -q -o "$1"'], input=lines, text=True, check=True)
    return time.monotonic() - start, cpu_seconds() - cpu


def curl_tar(archive_url: str, out: Path) -> tuple[float, float]:
    """(seconds, CPU seconds) for curl | zstd -d | tar -x of the one archive into `out`, a
    new directory (see small_set: nothing is removed before a timed run of the small set)."""
    out.mkdir(parents=True)
    settle()
    cpu, start = cpu_seconds(), time.monotonic()
    subprocess.run(["sh", "-c", f'curl -sSf "{archive_url}" | zstd -d -q | tar -x -C "{out}"'],
                   check=True)
    return time.monotonic() - start, cpu_seconds() - cpu


PHASES: dict[str, list[tuple[float, float, float, int]]] = {}  # url -> each pull's phases


def our_pull(artifact_id: str, config: CacheConfig, store_root: Path) -> tuple[float, float]:
    """(seconds, CPU seconds) for a pull into an empty store (a store_root that does not
    exist yet has nothing to remove). Its phases (record, download, commit seconds) go to
    PHASES under the substituter's URL."""
    remove_tree(store_root)
    settle()
    stats = TransferStats()
    cpu, start = cpu_seconds(), time.monotonic()
    got = pull(Store(store_root), artifact_id, config, stats=stats)
    assert got is not None
    PHASES.setdefault(config.substituters[0], []).append(
        (stats.record_seconds, stats.download_seconds, stats.commit_seconds,
         stats.unpack_workers))
    return time.monotonic() - start, cpu_seconds() - cpu


def phases_line(config: CacheConfig) -> str:
    """The median seconds of a pull's phases (for the table: where its time goes), and the
    worker processes that unpacked its packs (cache/pack_processes.py), if any."""
    runs = PHASES.get(config.substituters[0], [])
    if not runs:
        return "-"
    workers = max(r[3] for r in runs)
    return "/".join(f"{statistics.median(r[i] for r in runs):.2f}" for i in range(3)) + \
        (f" ({workers} proc)" if workers else "")


def med(runs: Runs, i: int = 0) -> float:
    return statistics.median(r[i] for r in runs)


@dataclass
class Pushed:
    """An artifact pushed to nginx: its manifest, wire size and first-push time."""
    art: Path
    manifest: Manifest
    size: int
    wire: int
    push_s: float
    requests: int


def push_tree(store: Store, wheel: Path, tree: TreeSet, config: CacheConfig, key: SecretKey,
              server: NginxServer) -> Pushed:
    art = make_artifact(store, wheel, tree, "base")
    manifest = Store.read_manifest(art)
    mark = server.mark()
    t0 = time.monotonic()
    push_many([art], config, key)
    push_s = time.monotonic() - t0
    log = server.access_log()[mark:]
    wire = sum(e.request_length for e in log if e.method == "PUT")
    return Pushed(art, manifest, manifest.total_size(), wire, push_s, len(log))


def delta_line(store: Store, wheel: Path, tree: TreeSet, config: CacheConfig, key: SecretKey,
               pulled_into: Path, size: int, server: NginxServer) -> str:
    """One file changes: what a push and a pull into a store holding the base move."""
    art2 = make_artifact(store, wheel, tree, "delta", tweak=True)
    mark = server.mark()
    push_many([art2], config, key)
    put = sum(e.request_length for e in server.access_log()[mark:] if e.method == "PUT")
    mark = server.mark()
    delta = TransferStats()
    pull(Store(pulled_into), Store.read_manifest(art2).id, config, stats=delta)
    gets = [e for e in server.access_log()[mark:] if e.method == "GET"]
    wire = sum(e.body_bytes_sent for e in gets)
    return (f"one-file delta ({tree.name}): push sent {put / 1e3:.1f} kB; pull moved "
            f"{wire / 1e3:.1f} kB in {len(gets)} GETs (record included), "
            f"{delta.files_linked} files hard-linked locally; artifact {size / 1e6:.0f} MB -> "
            f"{wire / size:.4%} moved")


@dataclass
class Bench:
    """What both sets share: scratch dir, the nginx, the wheel, store A, key and config."""
    work: Path
    server: NginxServer
    wheel: Path
    store: Store
    key: SecretKey
    url: str
    config: CacheConfig


def large_set(args: argparse.Namespace, ctx: Bench) -> dict[str, float]:
    p: Pushed = push_tree(ctx.store, ctx.wheel, LARGE, ctx.config, ctx.key,
                          ctx.server)
    blobs = cache_objects(ctx.server, p.manifest.id)
    seq: Runs = []
    par: Runs = []
    ours: Runs = []
    for _ in range(args.rounds):  # interleaved, so load from elsewhere hits all alike
        seq.append(curl_blobs(ctx.url, blobs, ctx.work / "curl-out", 1))
        par.append(curl_blobs(ctx.url, blobs, ctx.work / "curl-out", args.jobs))
        ours.append(our_pull(p.manifest.id, ctx.config, ctx.work / "B"))
    remove_tree(ctx.work / "curl-out")
    delta = delta_line(ctx.store, ctx.wheel, LARGE, ctx.config, ctx.key,
                       ctx.work / "B", p.size, ctx.server)

    def mbps(runs: Runs) -> float:
        return p.size / med(runs) / 1e6

    ratio_seq = mbps(ours) / mbps(seq)
    ratio_best = mbps(ours) / max(mbps(seq), mbps(par))
    print(f"\nlarge: {ctx.wheel.name} torch/lib/ as one artifact: {len(p.manifest.files)} "
          f"files, {p.size / 1e6:.0f} MB ({p.wire / 1e6:.0f} MB pushed), {args.rounds} rounds "
          f"(median), load average {os.getloadavg()[0]:.1f}")
    rows = [("curl | zstd -d, one blob at a time (baseline)", seq),
            (f"curl | zstd -d, {args.jobs} at a time", par),
            (f"orchestrator pull (jobs={args.jobs}, sha256-checked, committed)", ours)]
    print(f"{'method':<62} {'seconds':>8} {'MB/s':>8} {'CPU s':>8}")
    for name, runs in rows:
        print(f"{name:<62} {med(runs):>8.2f} {mbps(runs):>8.0f} {med(runs, 1):>8.2f}")
    for label, ratio in (("ratio: pull / baseline", ratio_seq),
                         ("ratio: pull / best of both curl runs", ratio_best)):
        print(f"{label + f' (goal >= {GOAL:.1f})':<62} {'':>8} {ratio:>8.2f}"
              f"  {'OK' if ratio >= GOAL else 'BELOW GOAL'}")
    print(f"{'push (zstd -3 + PUT, first time)':<62} {p.push_s:>8.2f} "
          f"{p.size / p.push_s / 1e6:>8.0f}")
    print(delta)
    return {"pull_s": med(ours), "curl_seq_s": med(seq), "curl_par_s": med(par),
            "files": len(p.manifest.files), "mb": p.size / 1e6, "ratio_seq": ratio_seq,
            "ratio_best": ratio_best}


def small_set(args: argparse.Namespace, ctx: Bench) -> dict[str, float]:
    p: Pushed = push_tree(ctx.store, ctx.wheel, SMALL, ctx.config, ctx.key,
                          ctx.server)
    archive = ctx.server.root / "open" / "bench-small.tar.zst"
    t0 = time.monotonic()
    subprocess.run(["sh", "-c", f'tar -C "{p.art}" -cf - prefix | zstd -3 -q -f -o "{archive}"'],
                   check=True)
    archive_s = time.monotonic() - t0
    archive_url = ctx.server.url("open") + archive.name
    tar: Runs = []
    ours: Runs = []
    # Every timed run writes ~12k new files into a new directory, and the outputs are removed
    # only after the last round. ext4 does not hand out the inode of a file deleted in the
    # last 60 s (5 min while its inode table block is dirty): `recently_deleted()` reads the
    # inode table for every such free inode it passes, so creating 12k files right after
    # removing 12k others cost up to 10x the kernel time (perf: 70 % of tar -x in
    # find_get_block_common/recently_deleted, 0.9 s -> 8 s for the same archive). Removing
    # the last round's output before each run measured that, not the pull or tar.
    # Which of the two goes first alternates between rounds.
    outs = ctx.work / "small-rounds"
    remove_tree(outs)  # what an interrupted run left
    outs.mkdir(parents=True)
    store_root = outs / "B-small-0"
    PHASES.pop(ctx.config.substituters[0], None)  # this set's pulls only
    for r in range(args.rounds):
        store_root = outs / f"B-small-{r}"
        for method in ("tar", "ours") if r % 2 == 0 else ("ours", "tar"):
            if method == "tar":
                tar.append(curl_tar(archive_url, outs / f"tar-out-{r}"))
            else:
                ours.append(our_pull(p.manifest.id, ctx.config, store_root))
    delta = delta_line(ctx.store, ctx.wheel, SMALL, ctx.config, ctx.key,
                       store_root, p.size, ctx.server)
    remove_tree(outs)
    ratio = med(tar) / med(ours)  # throughput ratio: same bytes, so baseline s / pull s
    print(f"\nsmall: {ctx.wheel.name} torch/ without lib/ as one artifact: "
          f"{len(p.manifest.files)} files, {p.size / 1e6:.0f} MB, {args.rounds} rounds "
          f"(median), load average {os.getloadavg()[0]:.1f}")
    print(f"{'method':<62} {'seconds':>8} {'MB/s':>8} {'CPU s':>8}")
    for name, runs in (("curl | zstd -d | tar -x, one archive (baseline)", tar),
                       (f"orchestrator pull (jobs={args.jobs}, sha256-checked, committed)",
                        ours)):
        print(f"{name:<62} {med(runs):>8.2f} {p.size / med(runs) / 1e6:>8.0f} "
              f"{med(runs, 1):>8.2f}")
    print(f"{f'ratio: pull / baseline (goal >= {SMALL_GOAL:.1f})':<62} {'':>8} {ratio:>8.2f}"
          f"  {'OK' if ratio >= SMALL_GOAL else 'BELOW GOAL'}")
    print(f"{'pull phases: record / download / commit (median s)':<62} "
          f"{phases_line(ctx.config):>17}")
    print(f"{f'push (first time): {p.requests} requests, {p.wire / 1e6:.0f} MB sent':<62} "
          f"{p.push_s:>8.2f}")
    print(f"{'tar | zstd -3 of the same tree, %.0f MB' % (archive.stat().st_size / 1e6):<62} "
          f"{archive_s:>8.2f}")
    print(delta)
    return {"small_pull_s": med(ours), "small_tar_s": med(tar), "small_files":
            len(p.manifest.files), "small_mb": p.size / 1e6, "small_ratio": ratio,
            "small_push_s": p.push_s, "small_push_requests": p.requests}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", help="torch 2.13.0 wheel (default: pip download)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--set", choices=("large", "small", "both"), default="both")
    ap.add_argument("--work", help="scratch dir (default: a temp dir, removed at the end)")
    args = ap.parse_args()
    os.environ["ORCH_NO_PROGRESS"] = "1"
    for tool in ("nginx", "curl", "zstd", "tar"):
        if not shutil.which(tool) and not Path(f"/usr/sbin/{tool}").exists():
            print(f"error: {tool} not found on PATH", file=sys.stderr)
            return 2
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="orch-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    server = NginxServer(work / "nginx").start()
    try:
        key = SecretKey.generate("bench")
        url = server.url("open")
        ctx = Bench(work, server, find_wheel(work, args.wheel), Store(work / "A").ensure(), key,
                    url, CacheConfig(substituters=[url], trusted_keys=[key.public.line()],
                                     jobs=args.jobs, timeout=60))
        print(f"cache_pull: nginx on 127.0.0.1, {os.cpu_count()} cores, "
              f"load average {os.getloadavg()[0]:.1f} at the start")
        out: dict[str, float] = {}
        if args.set in ("large", "both"):
            out.update(large_set(args, ctx))
        if args.set in ("small", "both"):
            out.update(small_set(args, ctx))
        print(json.dumps(out))
        return 0
    finally:
        server.stop()
        if not args.work:
            remove_tree(work)


if __name__ == "__main__":
    sys.exit(main())
