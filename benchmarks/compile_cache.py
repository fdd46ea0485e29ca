"""Benchmark: the compile cache and distcc on the demo recipe, through the real CLI.

Scenarios, each a `doit build` with a fresh build tree (wall time of the command, the
manifest's build_s, ccache's hits/misses from the build summary):

  cold               empty store, empty local cache, the remote (nginx WebDAV) written
  cold, no remote    the same without a remote: the baseline for distcc
  warm local         same store, artifacts and build trees removed, local cache warm
  remote only        another store (empty local cache), only the remote warm
  second checkout    the same tree copied to another path, same store
  distcc             empty store, no remote, misses sent to a distccd on 127.0.0.1 (the
                     default variant, -g: through orch-distcc-compile, byte-identical)
  sccache cold/warm  compile_cache=sccache, local cache only: empty store, then rebuilt
  sccache 2nd ch.    the second checkout with compile_cache=sccache, same store
  check=1            the reproducibility check of the cold build's artifact (a fresh tree at
                     another path, compile cache off): identical or the count that differ

    .venv/bin/python benchmarks/compile_cache.py [--rounds N] [--keep DIR]
    .venv/bin/python benchmarks/compile_cache.py --slice c10 [--toolchain-store DIR]

--slice c10 runs the same scenarios on c10 of the pinned PyTorch 1.13.1 (recipe=pytorch
targets=c10), built from two copies of the unpacked tree at different paths (developer
git checkouts, source=PATH); about half an hour on 2 cores. --toolchain-store reuses the
toolchain materialized in an existing store (linked, never written) instead of a fresh one.

Goals (issue 9): warm >= 10x faster than cold (c10; "ninja s" is the compile phase without
configure, "cold/this" its speed-up; the demo is dominated by cmake's
configure, see build_s), second checkout >= 95 % hits (ccache and sccache), distcc on
loopback <= 1.3x local.
Needs nginx and distccd on PATH (and .ci/pytorch-prereqs.sh for --slice c10).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "nginx"))

from nginx_server import PASSWORD, USER, NginxServer, free_port  # noqa: E402

SUMMARY = re.compile(r"compile cache: (\d+) hit\(s\), (\d+) miss\(es\)")
COMPILE_PHASE = re.compile(r"✓ build\s+([\d.]+)s")  # the ninja phase, without configure


@dataclass
class Result:
    name: str
    wall_s: float
    build_s: float
    hits: int
    misses: int
    compile_s: float = 0.0

    @property
    def hit_rate(self) -> float:
        return self.hits / (self.hits + self.misses) if self.hits + self.misses else 0.0


SLICES = {"demo": (), "c10": ("recipe=pytorch", "targets=c10")}


class Bench:
    def __init__(self, work: Path, nginx: NginxServer, slice_args: tuple[str, ...],
                 toolchain_store: Path | None) -> None:
        self.work = work
        self.nginx = nginx
        self.slice_args = slice_args
        self.remote_cfg = work / "remote.toml"
        self.remote_cfg.write_text(f'[compile_cache]\nremote = "{nginx.url("cache")}ccache"\n')
        self.local_cfg = work / "local.toml"
        self.local_cfg.write_text("")
        tc_store = toolchain_store or work / "toolchain-store"
        p = self.run_doit(["toolchain", "format=json", f"store={tc_store}", *self.recipe_arg()],
                          self.local_cfg)
        self.toolchain = Path(json.loads(p.stdout.strip().splitlines()[-1])["toolchain"])

    def recipe_arg(self) -> list[str]:
        return [a for a in self.slice_args if a.startswith("recipe=")]

    def env(self, config: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("ORCH_CACHE_", "CCACHE_", "DISTCC_"))
               and k not in ("ORCH_STORE", "MAX_JOBS")}
        env.update(ORCH_CACHE_CONFIG=str(config), ORCH_NO_PROGRESS="1",
                   ORCH_CACHE_USER=USER, ORCH_CACHE_PASSWORD=PASSWORD)
        return env

    def run_doit(self, args: list[str], config: Path) -> subprocess.CompletedProcess:
        p = subprocess.run([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), *args],
                           cwd=REPO, env=self.env(config), capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"doit {' '.join(args)} failed:\n{p.stdout}\n{p.stderr}")
        return p

    def store(self, name: str) -> Path:
        root = self.work / name
        (root / "toolchains").mkdir(parents=True)
        os.symlink(self.toolchain, root / "toolchains" / self.toolchain.name)
        return root

    def checkout(self, rel: str) -> Path:
        """A developer checkout at work/rel: the demo's sources, or for c10 a copy of the
        pinned PyTorch tree (unpacked once, by a build of no target, in a scratch store)."""
        dest = self.work / rel
        if not self.recipe_arg():
            shutil.copytree(REPO / "recipes" / "demo", dest)
            return dest
        unpack = self.work / "unpack-store"
        if not (unpack / "sources").is_dir():
            p = subprocess.run([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), "build",
                                *self.recipe_arg(), "targets=no_such_target", "substitute=0",
                                f"store={self.store('unpack-store')}"], cwd=REPO,
                               env=self.env(self.local_cfg), capture_output=True, text=True)
            if not (unpack / "sources").is_dir():
                raise SystemExit(f"the pinned tree was not unpacked:\n{p.stdout}\n{p.stderr}")
        first = self.work / "first-checkout"
        if not first.is_dir():  # a git checkout, as a developer has: PyTorch's .gitignore
            # keeps what its configure writes into the tree (version.h, Config.h, ...) out of
            # the checkout's identity, so building does not change the id
            [tree] = list((unpack / "sources").iterdir())
            shutil.copytree(tree, first, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__"))
            subprocess.run(["chmod", "-R", "u+w", str(first)], check=True)
            git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", "-C",
                   str(first)]
            for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "pinned tree"]):
                subprocess.run([*git, *cmd], check=True, capture_output=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-a", str(first), str(dest)], check=True)
        return dest

    def build(self, name: str, store: Path, source: Path, config: Path,
              *extra: str) -> Result:
        for d in ("store", "build"):
            if (store / d).exists():
                subprocess.run(["chmod", "-R", "u+w", str(store / d)], check=True)
                shutil.rmtree(store / d)
        t0 = time.perf_counter()
        p = self.run_doit(["build", "substitute=0", "format=json", f"store={store}",
                           f"source={source}", *self.slice_args, *extra], config)
        wall = time.perf_counter() - t0
        m = SUMMARY.search(p.stdout + p.stderr)
        path = Path(json.loads(p.stdout.strip().splitlines()[-1])["path"])
        build_s = json.loads((path / "manifest.json").read_text())["timings"]["build_s"]
        c = COMPILE_PHASE.search(p.stderr)
        result = Result(name, wall, build_s, int(m[1]) if m else 0, int(m[2]) if m else 0,
                        float(c[1]) if c else 0.0)
        print(f"  {result}", file=sys.stderr, flush=True)  # kept if a later scenario fails
        return result


    def check(self, store: Path, source: Path) -> Result:
        """check=1 on the artifact already in `store`: its wall time, and as hits/misses the
        files identical / different (missing and extra count as different)."""
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), "build",
                            "check=1", "substitute=0", "format=json", f"store={store}",
                            f"source={source}", *self.slice_args], cwd=REPO,
                           env=self.env(self.local_cfg), capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if p.returncode not in (0, 1):
            raise SystemExit(f"doit build check=1 failed:\n{p.stdout}\n{p.stderr}")
        if p.returncode == 1:  # the per-file list and the first differing section
            print(p.stderr.strip()[-4000:], file=sys.stderr)
        if p.returncode == 1:
            bad = sum(1 for line in p.stdout.splitlines()
                      if line.split()[:1] in (["different"], ["missing"], ["extra"]))
            return Result("check=1", wall, 0.0, -1, bad)
        counts = json.loads(p.stdout.strip().splitlines()[-1])["comparison"]["counts"]
        return Result("check=1", wall, 0.0, counts.get("identical", 0),
                      sum(counts.get(k, 0) for k in ("different", "missing", "extra")))


def start_distccd(work: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    log = (work / "distccd.log").open("wb")
    proc = subprocess.Popen([shutil.which("distccd") or "/usr/bin/distccd", "--daemon",
                             "--no-detach", "--allow", "127.0.0.1", "--listen", "127.0.0.1",
                             "--port", str(port), "--log-stderr"], stdout=log,
                            stderr=subprocess.STDOUT)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    raise SystemExit("distccd did not start")


def run(work: Path, rounds: int, slice_name: str, toolchain_store: Path | None) -> list[Result]:
    nginx = NginxServer(work / "nginx").start()
    distccd, port = start_distccd(work)
    try:
        b = Bench(work, nginx, SLICES[slice_name], toolchain_store)
        src = b.checkout(f"alice/src/{slice_name}")
        other = b.checkout(f"elsewhere/deeper/checkout-two/{slice_name}")
        results: list[Result] = []
        for r in range(rounds):
            a, d = b.store(f"a{r}"), b.store(f"d{r}")
            results += [
                b.build("cold", a, src, b.remote_cfg),
                b.check(a, src),
                b.build("cold, no remote", d, src, b.local_cfg),
                b.build("warm local", a, src, b.remote_cfg),
                b.build("remote only", b.store(f"b{r}"), src, b.remote_cfg),
                b.build("second checkout", a, other, b.remote_cfg),
                b.build("distcc (loopback)", b.store(f"c{r}"), src, b.local_cfg,
                        f"distcc_hosts=127.0.0.1:{port}/4"),
            ]
            if (b.toolchain / "venv" / "bin" / "sccache").is_file():
                s = b.store(f"s{r}")  # compile_cache=sccache, local only: cold, warm, elsewhere
                results += [b.build("sccache cold", s, src, b.local_cfg, "compile_cache=sccache"),
                            b.build("sccache warm", s, src, b.local_cfg, "compile_cache=sccache"),
                            b.build("sccache 2nd checkout", s, other, b.local_cfg,
                                    "compile_cache=sccache")]
            else:
                print(f"sccache rows skipped: the {slice_name} lock has no sccache",
                      file=sys.stderr)
            nginx_area = nginx.root / "cache" / "ccache"
            if nginx_area.exists():
                shutil.rmtree(nginx_area)  # next round starts with an empty remote
        return results
    finally:
        distccd.terminate()
        distccd.wait()
        nginx.stop()


def median_by_name(results: list[Result]) -> list[Result]:
    out: dict[str, list[Result]] = {}
    for r in results:
        out.setdefault(r.name, []).append(r)
    picked = []
    for rs in out.values():
        rs = sorted(rs, key=lambda r: r.wall_s)
        picked.append(rs[len(rs) // 2])
    return picked


def table(results: list[Result]) -> str:
    cold = next(r for r in results if r.name == "cold")
    local = next(r for r in results if r.name == "cold, no remote")
    lines = [f"{'scenario':<20} {'wall s':>7} {'build s':>8} {'wall/cold':>9} "
             f"{'build/cold':>10} {'ninja s':>8} {'cold/this':>9} {'hits':>5} {'misses':>6} "
             f"{'hit rate':>8}"]
    for r in results:
        if r.name == "check=1":
            verdict = ("not reproducible (see stderr)" if r.hits < 0 else
                       f"{r.hits} file(s) identical, {r.misses} different")
            lines.append(f"{r.name:<20} {r.wall_s:7.2f} {'':>8} {r.wall_s / cold.wall_s:9.2f} "
                         f"{'':>10} {verdict}")
            continue
        speedup = f"{cold.compile_s / r.compile_s:8.1f}x" if r.compile_s else f"{'-':>9}"
        lines.append(f"{r.name:<20} {r.wall_s:7.2f} {r.build_s:8.2f} {r.wall_s / cold.wall_s:9.2f} "
                     f"{r.build_s / cold.build_s:10.2f} {r.compile_s:8.2f} {speedup} "
                     f"{r.hits:5d} {r.misses:6d} {r.hit_rate:8.0%}")
    dist = next(r for r in results if r.name.startswith("distcc"))
    lines.append(f"distcc / cold without remote: wall {dist.wall_s / local.wall_s:.2f}x, "
                 f"build {dist.build_s / local.build_s:.2f}x (goal <= 1.3x)")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--keep", help="work directory to use and keep (default: a temp dir)")
    ap.add_argument("--slice", choices=sorted(SLICES), default="demo")
    ap.add_argument("--toolchain-store", type=Path,
                    help="an existing store whose materialized toolchain is reused (linked)")
    args = ap.parse_args()
    print(f"compile cache benchmark: {args.slice}", file=sys.stderr)
    if args.keep:
        work = Path(args.keep)
        work.mkdir(parents=True, exist_ok=False)
        results = run(work, args.rounds, args.slice, args.toolchain_store)
    else:
        work = Path(tempfile.mkdtemp(prefix="orch-ccbench-"))
        try:
            results = run(work, args.rounds, args.slice, args.toolchain_store)
        finally:
            subprocess.run(["chmod", "-R", "u+w", str(work)], check=False)
            shutil.rmtree(work, ignore_errors=True)
    print(table(median_by_name(results)))


if __name__ == "__main__":
    main()
