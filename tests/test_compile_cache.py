"""The compile cache through the real CLI, real ccache and a real nginx WebDAV remote:
hits across a rebuild in a fresh build tree, a second checkout at another path and a
teammate's empty store; compile_cache=off gives the same bytes; status/gc; faults and bad
settings."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "nginx"))
from conftest import DoitResult, make_store  # noqa: E402
from nginx_fixtures import nginx  # noqa: E402,F401  (fixture)
from nginx_server import PASSWORD, USER, NginxServer, free_port  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SUMMARY = re.compile(r"compile cache: (\d+) hit\(s\), (\d+) miss\(es\)")
DEMO_OBJECTS = 4


class Run(DoitResult):
    """conftest's DoitResult plus the build summary's compile-cache counters."""

    def hits_misses(self) -> tuple[int, int]:
        m = SUMMARY.search(self.output)
        assert m, self.output
        return int(m[1]), int(m[2])


def doit(*args: str, env: dict[str, str]) -> Run:
    p = subprocess.run([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), *args],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    return Run(p.returncode, p.stdout, p.stderr)


def base_env(config: Path, **extra: str) -> dict[str, str]:
    """The user's environment without cache/ccache/distcc settings, cache.toml = config
    (an empty one is written where it does not exist)."""
    if not config.exists():
        config.write_text("")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ORCH_CACHE_", "CCACHE_", "DISTCC_")) and k not in ("ORCH_STORE", "MAX_JOBS")}
    env.update(ORCH_CACHE_CONFIG=str(config), ORCH_NO_PROGRESS="1", **extra)
    return env


def checkout(dest: Path) -> Path:
    shutil.copytree(REPO / "recipes" / "demo", dest)
    return dest


def make_writable_and_remove(path: Path) -> None:
    for dirpath, dirnames, _ in os.walk(path):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o755)
    shutil.rmtree(path)


def fresh_trees(store: Path) -> None:
    """Forget the artifacts and the build trees (the compile cache stays)."""
    for d in ("store", "build"):
        if (store / d).exists():
            make_writable_and_remove(store / d)


def files_of(artifact: Path) -> dict[str, str]:
    m = json.loads((artifact / "manifest.json").read_text())
    return {f["path"]: f["sha256"] for f in m["files"] if f["path"].startswith("prefix/")}


@dataclass
class Team:
    root: Path
    config: Path
    nginx: NginxServer
    toolchain: Path

    def env(self, **extra: str) -> dict[str, str]:
        return base_env(self.config, ORCH_CACHE_USER=USER, ORCH_CACHE_PASSWORD=PASSWORD, **extra)

    def store(self, name: str) -> Path:
        return make_store(self.root / name, self.toolchain)


@pytest.fixture(scope="module")
def team(nginx: NginxServer, tmp_path_factory: pytest.TempPathFactory,  # noqa: F811
         session_toolchain: Path) -> Team:
    root = tmp_path_factory.mktemp("ccteam")
    config = root / "cache.toml"
    config.write_text(f'[compile_cache]\nremote = "{nginx.url("cache")}ccache"\n')
    return Team(root, config, nginx, session_toolchain)


def test_hits_across_rebuild_checkouts_and_teammates(team: Team) -> None:
    src_a = checkout(team.root / "alice" / "src" / "demo")
    store_a = team.store("store-a")
    cold = doit("build", "substitute=0", f"source={src_a}", f"store={store_a}", env=team.env())
    assert cold.returncode == 0, cold.output
    assert cold.hits_misses() == (0, DEMO_OBJECTS), cold.output
    puts = [e for e in team.nginx.access_log() if e.method == "PUT" and "/ccache/" in e.uri]
    assert puts and all(e.status in (201, 204) for e in puts), puts

    # The same variant again in a fresh build tree: every object from the local cache.
    fresh_trees(store_a)
    again = doit("build", "substitute=0", f"source={src_a}", f"store={store_a}", env=team.env())
    assert again.returncode == 0, again.output
    assert again.hits_misses() == (DEMO_OBJECTS, 0), again.output

    # A second checkout of the same tree at another path (another depth, too).
    src_b = checkout(team.root / "elsewhere" / "deeper" / "checkout-two")
    fresh_trees(store_a)
    second = doit("build", "substitute=0", f"source={src_b}", f"store={store_a}", env=team.env())
    assert second.returncode == 0, second.output
    assert second.hits_misses() == (DEMO_OBJECTS, 0), second.output

    # A teammate: another store, empty local compile cache, the same remote.
    src_c = checkout(team.root / "bob" / "work" / "demo")
    store_b = team.store("store-b")
    mate = doit("build", "substitute=0", "format=json", f"source={src_c}", f"store={store_b}",
                env=base_env(team.config))  # no credentials: reads only
    assert mate.returncode == 0, mate.output
    assert mate.hits_misses() == (DEMO_OBJECTS, 0), mate.output
    assert f"{DEMO_OBJECTS} from the remote" in mate.output, mate.output
    built = json.loads(mate.stdout.strip().splitlines()[-1])
    [a] = (store_a / "store").iterdir()
    assert files_of(Path(built["path"])) == files_of(a)


def test_off_gives_identical_bytes(team: Team) -> None:
    src = checkout(team.root / "offsrc" / "demo")
    on_store, off_store = team.store("on"), team.store("off")
    on = doit("build", "substitute=0", "format=json", f"source={src}", f"store={on_store}",
              env=team.env())
    off = doit("build", "substitute=0", "format=json", "compile_cache=off", f"source={src}",
               f"store={off_store}", env=team.env())
    assert on.returncode == 0 and off.returncode == 0, on.output + off.output
    assert not SUMMARY.search(off.output), off.output
    assert not (off_store / "ccache").exists()
    on_path = Path(json.loads(on.stdout.strip().splitlines()[-1])["path"])
    off_path = Path(json.loads(off.stdout.strip().splitlines()[-1])["path"])
    assert files_of(on_path) == files_of(off_path)
    so = on_path / "prefix" / "lib" / "libdemo_ops.so"
    assert str(src).encode() not in so.read_bytes() and b".orch-src" not in so.read_bytes()


def test_status_shows_and_gc_trims_the_cache(team: Team) -> None:
    store = team.store("gc")
    src = checkout(team.root / "gcsrc" / "demo")
    assert doit("build", "substitute=0", f"source={src}", f"store={store}",
                env=base_env(team.root / "none.toml")).returncode == 0
    status = doit("status", "format=json", f"store={store}", env=base_env(team.config))
    assert status.returncode == 0, status.output
    before = json.loads(status.stdout)["compile_cache"]
    assert before["bytes"] > 0 and before["dir"] == str(store / "ccache"), before
    human = doit("status", f"store={store}", env=base_env(team.config))
    assert "compile cache: " in human.output, human.output

    bad = doit("gc", "ccache_max=lots", f"store={store}", env=base_env(team.config))
    assert bad.returncode == 2 and "ccache_max" in bad.output, bad.output
    assert list((store / "store").iterdir()), "a bad gc value deleted something"
    gc = doit("gc", "ccache_max=1K", "ccache_evict_older=1d", "format=json", f"store={store}",
              env=base_env(team.config))
    assert gc.returncode == 0, gc.output
    assert json.loads(gc.stdout)["compile_cache_bytes"] < before["bytes"]


def test_unreachable_remote_is_one_warning_and_a_local_build(tmp_path: Path,
                                                             session_toolchain: Path) -> None:
    config = tmp_path / "cache.toml"
    config.write_text(f'[compile_cache]\nremote = "http://127.0.0.1:{free_port()}/ccache/"\n'
                      "timeout = 1\n")
    store = make_store(tmp_path / "store", session_toolchain)
    r = doit("build", "substitute=0", f"store={store}", env=base_env(config))
    assert r.returncode == 0, r.output
    warnings = [line for line in r.output.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "compile cache remote" in warnings[0], r.output
    assert r.hits_misses() == (0, DEMO_OBJECTS)


@pytest.mark.parametrize("table, setting", [
    ('remote = "ftp://cache/ccache"', "compile_cache.remote"),
    ('max-size = "lots"', "compile_cache.max-size"),
    ('distcc-hosts = ["box 1"]', "compile_cache.distcc-hosts"),
    ('distcc-hosts = ["box:99999"]', "compile_cache.distcc-hosts"),
    ('remot = "http://x/"', "compile_cache.remot"),
])
def test_bad_cache_toml_setting_is_exit_2_and_nothing_changed(tmp_path: Path, table: str,
                                                               setting: str) -> None:
    config = tmp_path / "cache.toml"
    config.write_text(f"[compile_cache]\n{table}\n")
    store = tmp_path / "store"
    r = doit("build", "substitute=0", f"store={store}", env=base_env(config))
    assert r.returncode == 2, r.output
    assert setting in r.output and "Traceback" not in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1, r.output
    assert not store.exists()


@pytest.mark.parametrize("var, name", [("compile_cache=sometimes", "compile_cache"),
                                       ("distcc_hosts=bad/host!", "distcc_hosts"),
                                       ("distcc_hosts=box/0", "distcc_hosts")])
def test_bad_launcher_variable_is_exit_2_and_nothing_changed(tmp_path: Path, var: str,
                                                             name: str) -> None:
    store = tmp_path / "store"
    r = doit("build", "substitute=0", var, f"store={store}", env=base_env(tmp_path / "none.toml"))
    assert r.returncode == 2, r.output
    assert name in r.output and "Traceback" not in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1, r.output
    assert not store.exists()
