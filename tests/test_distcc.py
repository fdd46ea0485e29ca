"""distcc as the fan-out for compile-cache misses, against a real distccd on 127.0.0.1:
the objects are compiled by the daemon and the files are byte-identical to a local build,
debug info included; an unreachable host is one warning line and a local build."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import make_store
from nginx_server import free_port
from test_compile_cache import DEMO_OBJECTS, base_env, checkout, doit, files_of

DISTCCD = shutil.which("distccd") or "/usr/bin/distccd"
pytestmark = pytest.mark.skipif(not Path(DISTCCD).exists() or shutil.which("distcc") is None,
                                reason="distcc is not installed (bootstrap.sh installs it)")


class Distccd:
    def __init__(self, root: Path) -> None:
        self.port = free_port()
        self.log = root / "distccd.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> Distccd:
        # --log-stderr: as root distccd drops to the distcc user, which cannot write our files
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [DISTCCD, "--daemon", "--no-detach", "--allow", "127.0.0.1", "--listen",
                 "127.0.0.1", "--port", str(self.port), "--jobs", "2", "--log-stderr",
                 "--log-level", "info"], stdout=log, stderr=subprocess.STDOUT)
        for _ in range(200):
            if self.proc.poll() is not None:
                raise RuntimeError(f"distccd exited: {self.log.read_text()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.1).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("distccd did not listen")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)

    def compiled(self) -> int:
        """Jobs the daemon finished (one "COMPILE_OK" line each)."""
        return self.log.read_text(errors="replace").count("COMPILE_OK")


@pytest.fixture
def distccd(tmp_path: Path) -> Iterator[Distccd]:
    d = Distccd(tmp_path).start()
    yield d
    d.stop()


def artifact(run) -> Path:
    return Path(json.loads(run.stdout.strip().splitlines()[-1])["path"])


def sections(path: Path) -> dict[str, bytes]:
    """Every section's bytes, by name (pyelftools, as the verifier reads ELF files)."""
    from elftools.elf.elffile import ELFFile
    with path.open("rb") as f:
        return {s.name: s.data() for s in ELFFile(f).iter_sections() if s.header.sh_type != "SHT_NOBITS"}


def test_distcc_build_is_byte_identical_to_a_local_one(tmp_path: Path, session_toolchain: Path,
                                                       distccd: Distccd) -> None:
    src = checkout(tmp_path / "src" / "demo")
    env = base_env(tmp_path / "cache.toml")
    runs = {}
    for variant in ("release", "relwithdebinfo"):
        local_store = make_store(tmp_path / f"local-{variant}", session_toolchain)
        dist_store = make_store(tmp_path / f"dist-{variant}", session_toolchain)
        local = doit("build", "substitute=0", "format=json", f"variant={variant}", f"source={src}",
                     f"store={local_store}", "compile_cache=off", env=env)
        assert local.returncode == 0, local.output
        before = distccd.compiled()
        dist = doit("build", "substitute=0", "format=json", f"variant={variant}", f"source={src}",
                    f"store={dist_store}", f"distcc_hosts=127.0.0.1:{distccd.port}/2", env=env)
        assert dist.returncode == 0, dist.output
        assert "warning" not in dist.output, dist.output
        assert dist.hits_misses() == (0, DEMO_OBJECTS), dist.output
        assert f"misses on distcc 127.0.0.1:{distccd.port}/2" in dist.output, dist.output
        assert distccd.compiled() - before >= DEMO_OBJECTS, distccd.log.read_text()
        runs[variant] = artifact(local), artifact(dist)
    # With and without debug info: every file byte-identical (with -g, ccache's prefix
    # command, distcc_compile, has distcc preprocess with -fdirectives-only; classic distcc
    # changed the DWARF column rows).
    for variant, (local, dist) in runs.items():
        a, b = files_of(local), files_of(dist)
        differ = {p: differing_sections(local / p, dist / p) for p in a if a[p] != b.get(p)}
        assert a.keys() == b.keys() and not differ, (variant, differ)


def differing_sections(a: Path, b: Path) -> list[str]:
    if a.read_bytes()[:4] != b"\x7fELF":
        return ["(not ELF)"]
    sa, sb = sections(a), sections(b)
    return sorted(n for n in sa.keys() | sb.keys() if sa.get(n) != sb.get(n))


# A producer string long enough for GCC to write it as .ascii chunks, and macros whose
# expansion moves columns (what classic distcc got wrong with -g).
SOURCE = """#include <stdio.h>
#define MAX(a, b)   ((a) > (b) ? (a) : (b))
#define DECLARE(name)   int name##_value = 0; int get_##name(void) { return name##_value; }
DECLARE(alpha)
int pick(int a,   int b) { printf("%d %s", MAX(a, b), __FILE__); return MAX(a,   b) + __LINE__; }
"""
MANY_FLAGS = ["-fno-math-errno", "-fno-trapping-math", "-fno-common", "-fstack-protector-strong",
              "-fno-strict-aliasing", "-fno-semantic-interposition", "-fno-plt", "-fwrapv",
              "-fno-delete-null-pointer-checks", "-fno-omit-frame-pointer", "-fno-tree-vectorize",
              "-fno-strict-overflow", "-ffunction-sections", "-fdata-sections"]


def compile_both(tmp_path: Path, distccd: Distccd, *flags: str) -> tuple[bytes, bytes, int]:
    """The object compiled here and through ccache's prefix command (real distccd), and how
    many jobs the daemon ran for it."""
    from orchestrator.builders.compile_cache.distcc import prefix_command
    src = tmp_path / "pick.c"
    src.write_text(SOURCE)
    cc = shutil.which("gcc") or "/usr/bin/gcc"
    args = [*flags, "-MD", "-MT", "pick.o", "-MF", "pick.o.d", "-c", "pick.c"]
    subprocess.run([cc, *args, "-o", "local.o"], cwd=tmp_path, check=True)
    (tmp_path / "local.d").write_bytes((tmp_path / "pick.o.d").read_bytes())
    script = prefix_command(tmp_path, Path(shutil.which("distcc") or "/usr/bin/distcc"))
    env = {**os.environ, "DISTCC_HOSTS": f"127.0.0.1:{distccd.port}/2",
           "DISTCC_DIR": str(tmp_path), "DISTCC_FALLBACK": "0"}
    before = distccd.compiled()
    r = subprocess.run([str(script), cc, *args, "-o", "pick.o"], cwd=tmp_path, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "pick.o.d").read_bytes() == (tmp_path / "local.d").read_bytes()
    assert not list(tmp_path.glob("*.s")), "the assembly was left behind"
    return (tmp_path / "local.o").read_bytes(), (tmp_path / "pick.o").read_bytes(), \
        distccd.compiled() - before


@pytest.mark.parametrize("flags", [("-O2", "-g"), ("-O0", "-g", "-gdwarf-4"),
                                   ("-O2", "-g", *MANY_FLAGS), ("-O2",)])
def test_prefix_command_compiles_remotely_with_local_bytes(tmp_path: Path, distccd: Distccd,
                                                           flags: tuple[str, ...]) -> None:
    local, dist, jobs = compile_both(tmp_path, distccd, *flags)
    assert jobs == 1, distccd.log.read_text()
    assert local == dist


def test_prefix_command_compiles_what_it_cannot_split_here(tmp_path: Path,
                                                          distccd: Distccd) -> None:
    local, dist, jobs = compile_both(tmp_path, distccd, "-O2", "-g3")  # .debug_macro
    assert jobs == 0 and local == dist


def test_prefix_command_reports_a_compile_error_once(tmp_path: Path, distccd: Distccd) -> None:
    from orchestrator.builders.compile_cache.distcc import prefix_command
    (tmp_path / "bad.c").write_text("int f(void) { return undefined_name; }\n")
    script = prefix_command(tmp_path, Path(shutil.which("distcc") or "/usr/bin/distcc"))
    env = {**os.environ, "DISTCC_HOSTS": f"127.0.0.1:{distccd.port}/2", "DISTCC_DIR": str(tmp_path)}
    r = subprocess.run([str(script), shutil.which("gcc") or "/usr/bin/gcc", "-g", "-c", "bad.c",
                        "-o", "bad.o"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode != 0 and r.stderr.count("error:") == 1, r.stderr
    assert not (tmp_path / "bad.o").exists() and not list(tmp_path.glob("*.s"))

def test_distcc_hosts_from_cache_toml(tmp_path: Path, session_toolchain: Path,
                                      distccd: Distccd) -> None:
    config = tmp_path / "cache.toml"
    config.write_text(f'[compile_cache]\ndistcc-hosts = ["127.0.0.1:{distccd.port}/2"]\n')
    store = make_store(tmp_path / "store", session_toolchain)
    r = doit("build", "substitute=0", f"store={store}", "variant=release", env=base_env(config))
    assert r.returncode == 0, r.output
    assert distccd.compiled() >= DEMO_OBJECTS, distccd.log.read_text()
    # distcc_hosts=off on the command line wins over the file
    store2 = make_store(tmp_path / "store2", session_toolchain)
    before = distccd.compiled()
    r2 = doit("build", "substitute=0", f"store={store2}", "variant=release", "distcc_hosts=off",
              env=base_env(config))
    assert r2.returncode == 0, r2.output
    assert distccd.compiled() == before


def test_unreachable_distcc_host_is_one_warning_and_a_local_build(tmp_path: Path,
                                                                  session_toolchain: Path) -> None:
    store = make_store(tmp_path / "store", session_toolchain)
    r = doit("build", "substitute=0", f"store={store}", "variant=release",
             f"distcc_hosts=127.0.0.1:{free_port()}/4", env=base_env(tmp_path / "cache.toml"))
    assert r.returncode == 0, r.output
    warnings = [line for line in r.output.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "distcc host(s) unreachable" in warnings[0], r.output
    assert r.hits_misses() == (0, DEMO_OBJECTS), r.output
