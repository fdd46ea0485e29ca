"""CUDA 12.4 from the lock (locks/cuda12.toml): Debian's non-free CUDA packages of trixie,
pinned by sha256, fetched without root from the mirror the machine's apt sources name (the
machine lists only bookworm main), through the machine's deb cache, and laid out as one toolkit
root; with /usr/local/cuda* invisible, CMake's FindCUDAToolkit accepts it, cudademo12 builds
for sm_90 and verifies, compute-sanitizer (from nvidia-cuda-toolkit) runs, and cuda-gdb 12.4
(trixie's build, through trixie's loader and libraries) debugs a program.

Shared: the cuda12 toolchain, once per run (conftest's cuda12_toolchain); its debs come from
~/.cache/orchestrator/debs, filled once per machine (bootstrap.sh pre-fetches them). The tests
that use it take `project` (a copy of the project to run doit or CMake in), which also marks
them e2e for conftest.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from conftest import REPO, DoitResult, make_store, run_doit
from test_cuda_toolkit import doit_argv, without_system_cuda

from orchestrator.errors import UserError
from orchestrator.lock.apt_suite import mirror_uri
from orchestrator.lock.files import load_lock
from orchestrator.model.lock import DebEntry

BUILT = re.compile(r"cudademo12 release ([0-9a-f]{40}): (built|present)")


def test_the_lock_pins_debian_s_cuda_12_4_by_sha256() -> None:
    from orchestrator.toolchain.materialize import toolchain_hash

    lock = load_lock(REPO / "locks", "cuda12")
    entry = lock.entries["cuda:toolkit"]
    assert entry.version == "12.4.131" and entry.origin == "deb"
    assert entry.root == "usr/lib/nvidia-cuda-toolkit"
    for name in ("nvidia-cuda-toolkit", "nvidia-cuda-dev", "libnvvm4", "libcudart12"):
        deb = lock.entries[f"deb:{name}"]
        assert isinstance(deb, DebEntry) and deb.suite == "trixie", name
        assert deb.pool == "pool/non-free/n/nvidia-cuda-toolkit" and entry.packages[name] == deb.sha256
    assert lock.entries["deb:nvidia-cuda-toolkit"].version == "12.4.131~12.4.1-2"
    assert lock.entries["deb:nvidia-cuda-dev"].version == "12.4.127~12.4.1-2"
    assert "libcudart_static.a" not in str(lock.entries["deb:nvidia-cuda-dev"].omit)
    # cuda-gdb and its suite's runtime (libc6 2.41, libstdc++6 14): a tree of their own, and
    # not part of the toolkit (what is built with it does not change with them).
    gdb = lock.entries["deb:nvidia-cuda-gdb"]
    assert gdb.tree == "cuda-gdb" and gdb.version == "12.4.127~12.4.1-2"
    assert lock.entries["deb:libc6"].tree == "cuda-gdb" and lock.entries["deb:libstdc++6"].tree == "cuda-gdb"
    assert not {"nvidia-cuda-gdb", "libc6"} & set(entry.packages)
    assert all(lock.entries[f"deb:{n}"].tree is None for n in entry.packages)
    # The machine's own debs (lldb-14) stay as they were: no suite, no pool.
    assert lock.entries["deb:lldb-14"].pool is None
    assert "suite" not in lock.entries["deb:lldb-14"].model_dump()
    # Any deb's hash, or what is omitted of it, is the toolchain's identity.
    dev = lock.entries["deb:nvidia-cuda-dev"]
    for moved in (dev.model_copy(update={"sha256": "1" * 64}), dev.model_copy(update={"omit": ("x.a",)})):
        other = lock.model_copy(update={"entries": {**lock.entries, "deb:nvidia-cuda-dev": moved}})
        assert toolchain_hash(other) != toolchain_hash(lock)


def test_the_toolkit_root_runs_on_this_system_and_find_cuda_toolkit_accepts_it(
        cuda12_toolchain: Path, project: Path, tmp_path: Path) -> None:
    root = cuda12_toolchain / "cuda"
    for tool in ("bin/nvcc", "bin/ptxas", "bin/fatbinary", "bin/nvlink", "bin/cudafe++",
                 "nvvm/bin/cicc", "nvvm/libdevice/libdevice.10.bc", "include/cuda_runtime.h",
                 "include/thrust/version.h", "include/cub/cub.cuh", "lib64/libcudart_static.a"):
        assert (root / tool).exists(), tool
    assert os.readlink(root / "lib64") == "lib"
    assert os.readlink(root / "lib" / "libcudart.so") == "libcudart.so.12"
    assert (root / "lib" / "libcudart.so").resolve().is_file()
    assert not (root / "lib" / "libcublas.so").is_symlink()  # libcublas12 is not locked
    assert not (root / "lib" / "libcublas_static.a").exists()  # omitted from nvidia-cuda-dev
    version = json.loads((root / "version.json").read_text())
    assert version["cuda"]["version"] == "12.4.131"
    assert version["nvidia_cuda_dev"]["version"] == "12.4.127~12.4.1-2"
    facts = json.loads((cuda12_toolchain / "toolchain.json").read_text())["cuda"]
    assert facts["version"] == "12.4.131" and facts["origin"] == "deb"
    assert "sm_90" in facts["architectures"] and "sm_100" not in facts["architectures"]
    # CMake, with the system's CUDA made invisible: enable_language(CUDA), FindCUDAToolkit, a
    # kernel compiled and linked for sm_90; and compute-sanitizer of the same packages runs.
    src = tmp_path / "probe"
    src.mkdir()
    (src / "k.cu").write_text("#include <thrust/version.h>\n__global__ void k(float* x) "
                              "{ x[threadIdx.x] *= THRUST_MAJOR_VERSION; }\n"
                              "int main() { float* p; cudaMalloc(&p, 4); k<<<1, 1>>>(p); }\n")
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(probe LANGUAGES CXX CUDA)\n"
        "find_package(CUDAToolkit REQUIRED)\nadd_executable(k k.cu)\n"
        "get_target_property(cudart CUDA::cudart IMPORTED_LOCATION)\n"
        'file(WRITE "${CMAKE_BINARY_DIR}/found.txt" "${CUDAToolkit_VERSION}|${cudart}|'
        '${CUDAToolkit_INCLUDE_DIRS}|${CMAKE_CUDA_COMPILER_VERSION}")\n')
    venv = cuda12_toolchain / "venv" / "bin"
    build = tmp_path / "b"
    script = [
        "sh", "-c", f'"{venv / "cmake"}" -S "$1" -B "$2" -G Ninja -DCMAKE_MAKE_PROGRAM="{venv / "ninja"}" '
        f'-DCMAKE_CUDA_COMPILER="{root / "bin" / "nvcc"}" -DCUDAToolkit_ROOT="{root}" '
        f'-DCMAKE_CUDA_ARCHITECTURES=90 && "{venv / "cmake"}" --build "$2" && '
        f'"{root / "bin" / "cuobjdump"}" --list-elf "$2/k" && "{root / "bin" / "compute-sanitizer"}" --version && '
        f'"{root / "bin" / "cuda-gdb"}" --version && '
        f'"{root / "bin" / "cuda-gdb"}" -batch -ex "break main" -ex run -ex bt "$2/k"',
        "sh", str(src), str(build)]
    res = without_system_cuda(script, tmp_path / "empty", project)
    assert res.returncode == 0, res.stdout + res.stderr
    ver, cudart, includes, compiler = (build / "found.txt").read_text().split("|")
    assert ver == "12.4.131" and compiler == "12.4.131"
    real = cuda12_toolchain.resolve()
    assert Path(cudart).resolve().is_relative_to(real), cudart
    assert all(Path(i).resolve().is_relative_to(real) for i in includes.split(";")), includes
    assert "sm_90.cubin" in res.stdout, res.stdout
    assert "Compute Sanitizer" in res.stdout and "Version 2024.1.1" in res.stdout, res.stdout
    # cuda-gdb 12.4 (trixie's build: glibc 2.38) through its own suite's loader and libraries,
    # debugging the probe: it stops at main.
    assert "NVIDIA (R) cuda-gdb 12.4" in res.stdout, res.stdout
    assert re.search(r"Breakpoint 1, 0x[0-9a-f]+ in main \(\)|Breakpoint 1, main", res.stdout), res.stdout
    assert re.search(r"#0 .*main \(\)", res.stdout), res.stdout


def test_cudademo12_builds_and_verifies_for_sm_90_without_the_system_cuda(
        cuda12_toolchain: Path, project: Path, tmp_path: Path) -> None:
    store = make_store(tmp_path / "store", cuda12_toolchain)
    build = ["build", "recipe=cudademo12", "variant=release", f"store={store}", "substitute=0"]
    res = without_system_cuda(doit_argv(project, *build), tmp_path / "empty", project)
    hidden = DoitResult(res.returncode, res.stdout, res.stderr)
    assert hidden.returncode == 0, hidden.output
    m = BUILT.search(hidden.output)
    assert m and m[2] == "built", hidden.output
    [artifact] = (store / "store").iterdir()
    report = json.loads((artifact / "meta" / "verify.json").read_text())
    assert report["ok"] and report["checks"]["cuda"] == "pass", report
    assert report["files"]["prefix/lib/libcudademo.so"]["cuda"] == ["compute_90", "sm_90"]
    # The machine as it is (its CUDA visible, where it has one): the same artifact id.
    seen = run_doit(project, *build)
    assert seen.returncode == 0 and BUILT.search(seen.output)[1] == m[1], seen.output
    # An architecture CUDA 12.4 lacks (sm_100 came with 12.8): one line before any compile.
    recipe = project / "recipes" / "cudademo12.toml"
    recipe.write_text(recipe.read_text().replace('CMAKE_CUDA_ARCHITECTURES = "90"',
                                                 'CMAKE_CUDA_ARCHITECTURES = "90;100"'))
    bad = run_doit(project, *build)
    assert bad.returncode == 2 and "Traceback" not in bad.output, bad.output
    [line] = [ln for ln in bad.stderr.splitlines() if "CUDA architecture" in ln]
    assert "CUDA architecture '100' (CMAKE_CUDA_ARCHITECTURES) is not supported by the locked " \
           "nvcc 12.4.131; it supports: 50 52" in line, line


def test_a_deb_is_fetched_from_the_suite_s_pool_once_and_checked_against_the_lock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.toolchain import deb_install

    monkeypatch.setenv(deb_install.DEB_CACHE_ENV, str(tmp_path / "cache"))
    cudart = load_lock(REPO / "locks", "cuda12").entries["deb:libcudart12"]
    assert isinstance(cudart, DebEntry)
    wrong = cudart.model_copy(update={"sha256": "0" * 64})
    with pytest.raises(UserError, match=r"^lock mismatch: deb:libcudart12 libcudart12_12.4.127~12.4.1-2_amd64.deb "
                       rf"has sha256 {cudart.sha256}, the lock says 0{{64}}; run `doit lock`"):
        deb_install.cached_trees([wrong])
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [".lock", "unpacked"]
    assert not any((tmp_path / "cache" / "unpacked").iterdir())
    [tree] = deb_install.cached_trees([cudart])
    assert (tree / "usr/lib/x86_64-linux-gnu/libcudart.so.12.4.127").is_file()
    assert (tmp_path / "cache" / cudart.filename).is_file()
    # Cached: no network the second time (the mirror cannot be read now).
    monkeypatch.setattr(deb_install, "mirror_uri", lambda: "http://127.0.0.1:9")
    assert deb_install.cached_trees([cudart]) == [tree]


def test_the_mirror_is_read_from_the_machine_s_apt_sources(tmp_path: Path) -> None:
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    (etc / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.invalid/debian-security\nSuites: bookworm-security\n"
        "Components: main\n\nTypes: deb\n# a comment\nURIs: http://mirror.invalid/debian/\n"
        "Suites: bookworm bookworm-updates\nComponents: main\n")
    assert mirror_uri(etc) == "http://mirror.invalid/debian"
    (etc / "sources.list.d" / "debian.sources").unlink()
    (etc / "sources.list").write_text("deb [arch=amd64] http://other.invalid/debian bookworm main\n")
    assert mirror_uri(etc) == "http://other.invalid/debian"
    (etc / "sources.list").write_text("# nothing\n")
    with pytest.raises(UserError, match="no http\\(s\\) Debian mirror in the apt sources under"):
        mirror_uri(etc)


def test_a_cuda_spec_with_two_toolkits_or_none_is_one_line(tmp_path: Path) -> None:
    from orchestrator.lock.files import load_spec

    spec = (REPO / "locks" / "cuda12.toml").read_text()
    for text, says in ((spec.replace("[cuda.debs]", '[cuda]\nrequirements = ["nvidia-cuda-nvcc==13.0.88"]\n\n'
                                     "[cuda.debs]"), "has both requirements (wheels) and [cuda.debs]"),
                       (spec[:spec.index("[cuda.debs]")] + "[cuda]\n", "names no toolkit")):
        (tmp_path / "x.toml").write_text(text)
        with pytest.raises(UserError, match=rf"^{tmp_path}/x.toml: .*{re.escape(says)}.*; fix the spec$"):
            load_spec(tmp_path, "x")
