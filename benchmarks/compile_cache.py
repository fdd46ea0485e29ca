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

    .venv/bin/python benchmarks/compile_cache.py [--rounds N] [--keep DIR]

Goals (issue 9): warm >= 10x faster than cold (c10; the demo is dominated by cmake's
configure, see build_s), second checkout >= 95 % hits (ccache and sccache), distcc on
loopback <= 1.3x local.
The c10 slice of PyTorch is not run here (too heavy for a shared 2-core machine).
Needs nginx and distccd on PATH.
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


@dataclass
class Result:
    name: str
    wall_s: float
    build_s: float
    hits: int
    misses: int

    @property
    def hit_rate(self) -> float:
        return self.hits / (self.hits + self.misses) if self.hits + self.misses else 0.0


class Bench:
    def __init__(self, work: Path, nginx: NginxServer) -> None:
        self.work = work
        self.nginx = nginx
        self.remote_cfg = work / "remote.toml"
        self.remote_cfg.write_text(f'[compile_cache]\nremote = "{nginx.url("cache")}ccache"\n')
        self.local_cfg = work / "local.toml"
        self.local_cfg.write_text("")
        tc_store = work / "toolchain-store"
        self.run_doit(["toolchain", f"store={tc_store}"], self.local_cfg)
        [self.toolchain] = list((tc_store / "toolchains").iterdir())

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
        dest = self.work / rel
        shutil.copytree(REPO / "recipes" / "demo", dest)
        return dest

    def build(self, name: str, store: Path, source: Path, config: Path,
              *extra: str) -> Result:
        for d in ("store", "build"):
            if (store / d).exists():
                subprocess.run(["chmod", "-R", "u+w", str(store / d)], check=True)
                shutil.rmtree(store / d)
        t0 = time.perf_counter()
        p = self.run_doit(["build", "substitute=0", "format=json", f"store={store}",
                           f"source={source}", *extra], config)
        wall = time.perf_counter() - t0
        m = SUMMARY.search(p.stdout + p.stderr)
        path = Path(json.loads(p.stdout.strip().splitlines()[-1])["path"])
        build_s = json.loads((path / "manifest.json").read_text())["timings"]["build_s"]
        return Result(name, wall, build_s, int(m[1]) if m else 0, int(m[2]) if m else 0)


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


def run(work: Path, rounds: int) -> list[Result]:
    nginx = NginxServer(work / "nginx").start()
    distccd, port = start_distccd(work)
    try:
        b = Bench(work, nginx)
        src = b.checkout("alice/src/demo")
        other = b.checkout("elsewhere/deeper/checkout-two/demo")
        results: list[Result] = []
        for r in range(rounds):
            a, d = b.store(f"a{r}"), b.store(f"d{r}")
            results += [
                b.build("cold", a, src, b.remote_cfg),
                b.build("cold, no remote", d, src, b.local_cfg),
                b.build("warm local", a, src, b.remote_cfg),
                b.build("remote only", b.store(f"b{r}"), src, b.remote_cfg),
                b.build("second checkout", a, other, b.remote_cfg),
                b.build("distcc (loopback)", b.store(f"c{r}"), src, b.local_cfg,
                        f"distcc_hosts=127.0.0.1:{port}/4"),
            ]
            s = b.store(f"s{r}")  # compile_cache=sccache, local only: cold, warm, elsewhere
            results += [b.build("sccache cold", s, src, b.local_cfg, "compile_cache=sccache"),
                        b.build("sccache warm", s, src, b.local_cfg, "compile_cache=sccache"),
                        b.build("sccache 2nd checkout", s, other, b.local_cfg,
                                "compile_cache=sccache")]
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
    for name, rs in out.items():
        rs = sorted(rs, key=lambda r: r.wall_s)
        picked.append(rs[len(rs) // 2])
    return picked


def table(results: list[Result]) -> str:
    cold = next(r for r in results if r.name == "cold")
    local = next(r for r in results if r.name == "cold, no remote")
    lines = [f"{'scenario':<20} {'wall s':>7} {'build s':>8} {'wall/cold':>9} "
             f"{'build/cold':>10} {'hits':>5} {'misses':>6} {'hit rate':>8}"]
    for r in results:
        lines.append(f"{r.name:<20} {r.wall_s:7.2f} {r.build_s:8.2f} {r.wall_s / cold.wall_s:9.2f} "
                     f"{r.build_s / cold.build_s:10.2f} {r.hits:5d} {r.misses:6d} "
                     f"{r.hit_rate:8.0%}")
    dist = next(r for r in results if r.name.startswith("distcc"))
    lines.append(f"distcc / cold without remote: wall {dist.wall_s / local.wall_s:.2f}x, "
                 f"build {dist.build_s / local.build_s:.2f}x (goal <= 1.3x)")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--keep", help="work directory to use and keep (default: a temp dir)")
    args = ap.parse_args()
    if args.keep:
        work = Path(args.keep)
        work.mkdir(parents=True, exist_ok=False)
        results = run(work, args.rounds)
    else:
        work = Path(tempfile.mkdtemp(prefix="orch-ccbench-"))
        try:
            results = run(work, args.rounds)
        finally:
            subprocess.run(["chmod", "-R", "u+w", str(work)], check=False)
            shutil.rmtree(work, ignore_errors=True)
    print(table(median_by_name(results)))


if __name__ == "__main__":
    main()
