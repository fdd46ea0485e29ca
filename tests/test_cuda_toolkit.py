"""The CUDA toolkit from the lock (locks/cuda13.toml, `cuda:toolkit`): the CUDA 13 wheels
materialized as one toolkit root that CMake's FindCUDAToolkit and enable_language(CUDA)
accept, with the machine's own CUDA install (/usr/local/cuda*) made invisible by a private
mount namespace; cudademo builds and verifies there with the same artifact id as where it is
visible, and a second checkout at another path gets its CUDA object from the compile cache.
Bad input: an architecture the locked nvcc lacks, a CUDA recipe on a lock without a toolkit."""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, DoitResult, copy_project, make_store, run_doit

from orchestrator.errors import UserError
from orchestrator.toolchain.cuda_toolkit import check_architectures

SUMMARY = re.compile(r"compile cache: (\d+) hit\(s\), (\d+) miss\(es\)")
BUILT = re.compile(r"cudademo relwithdebinfo ([0-9a-f]{40}): (built|present)")


def system_cuda_dirs() -> list[str]:
    """The machine's CUDA installs (real directories behind /usr/local/cuda*)."""
    return sorted({os.path.realpath(p) for p in glob.glob("/usr/local/cuda*") if os.path.isdir(p)})


def without_system_cuda(argv: list[str], empty: Path, cwd: Path) -> subprocess.CompletedProcess:
    """Run argv in a private mount namespace where every /usr/local/cuda* directory is an
    empty one (the /usr/local/bin wrappers into it then fail too); checks that it is."""
    empty.mkdir(exist_ok=True)
    hide = "".join(f'mount --bind "$EMPTY" "{d}" || exit 97\n' for d in system_cuda_dirs())
    script = hide + 'if [ -n "$(ls -A /usr/local/cuda/ 2>/dev/null)" ]; then exit 98; fi\nexec "$@"\n'
    env = {k: v for k, v in os.environ.items() if k not in ("ORCH_STORE", "MAX_JOBS")}
    env["EMPTY"] = str(empty)
    res = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                          "sh", *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode not in (97, 98), res.stderr
    return res


def doit_argv(project: Path, *args: str) -> list[str]:
    import sys
    return [sys.executable, "-m", "doit", "-f", str(project / "dodo.py"), *args]


def test_toolkit_root_is_a_cuda_install_find_cuda_toolkit_accepts(session_cuda_toolchain: Path,
                                                                   session_toolchain: Path,
                                                                   tmp_path: Path) -> None:
    root = session_cuda_toolchain / "cuda"
    assert (root / "bin" / "nvcc").is_file() and (root / "nvvm" / "bin" / "cicc").is_file()
    assert os.readlink(root / "lib64") == "lib"
    assert os.readlink(root / "lib" / "libcudart.so") == "libcudart.so.13"
    assert (root / "lib" / "libcudart.so").resolve().is_file()
    assert (root / "targets" / "x86_64-linux" / "include" / "cuda_runtime.h").is_file()
    version = json.loads((root / "version.json").read_text())
    assert version["cuda"]["version"] == "13.0.88" and version["cuda_runtime"]["version"] == "13.0.96"
    facts = json.loads((session_cuda_toolchain / "toolchain.json").read_text())["cuda"]
    assert facts["version"] == "13.0.88" and "sm_90" in facts["architectures"]
    assert "sm_60" not in facts["architectures"]
    # CMake: enable_language(CUDA) + find_package(CUDAToolkit), nothing of the system's CUDA.
    src = tmp_path / "probe"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(probe LANGUAGES CXX CUDA)\n"
        "find_package(CUDAToolkit REQUIRED)\n"
        "get_target_property(cudart CUDA::cudart IMPORTED_LOCATION)\n"
        'file(WRITE "${CMAKE_BINARY_DIR}/found.txt" "${CUDAToolkit_VERSION}|${cudart}|'
        '${CUDAToolkit_INCLUDE_DIRS}|${CMAKE_CUDA_COMPILER_VERSION}")\n')
    venv = session_cuda_toolchain / "venv" / "bin"
    res = without_system_cuda(
        [str(venv / "cmake"), "-S", str(src), "-B", str(tmp_path / "b"), "-G", "Ninja",
         f"-DCMAKE_MAKE_PROGRAM={venv / 'ninja'}", f"-DCMAKE_CUDA_COMPILER={root / 'bin' / 'nvcc'}",
         f"-DCUDAToolkit_ROOT={root}", "-DCMAKE_CUDA_ARCHITECTURES=90"], tmp_path / "empty", tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    ver, cudart, includes, compiler = (tmp_path / "b" / "found.txt").read_text().split("|")
    assert ver == "13.0.88" and compiler == "13.0.88"
    assert Path(cudart).resolve().is_relative_to(session_cuda_toolchain.resolve()), cudart
    assert all(Path(i).resolve().is_relative_to(session_cuda_toolchain.resolve())
               for i in includes.split(";")), includes
    # torch's cpp_extension (the locked torch) finds the headers and lib64 under CUDA_HOME.
    py = session_toolchain / "venv" / "bin" / "python"
    out = subprocess.run([str(py), "-c", "import sys, torch.utils.cpp_extension as c; "
                          "c.CUDA_HOME = sys.argv[1]; "
                          "print(c.include_paths('cuda')[-1]); print(c.library_paths('cuda')[-1])",
                          str(root)], capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(root / "include"), str(root / "lib64")]


def test_cudademo_builds_without_the_system_cuda_same_id_and_cache_hits(
        session_cuda_toolchain: Path, tmp_path: Path) -> None:
    project = copy_project(tmp_path / "project")
    store = make_store(tmp_path / "store", session_cuda_toolchain)
    build = ["build", "recipe=cudademo", "variant=relwithdebinfo", f"store={store}", "substitute=0"]
    # Cold, with /usr/local/cuda invisible: nvcc compiles from the locked toolkit.
    res = without_system_cuda(doit_argv(project, *build), tmp_path / "empty", project)
    hidden = DoitResult(res.returncode, res.stdout, res.stderr)
    assert hidden.returncode == 0, hidden.output
    m = BUILT.search(hidden.output)
    assert m and m[2] == "built", hidden.output
    assert SUMMARY.search(hidden.output).groups() == ("0", "2"), hidden.output
    [artifact] = (store / "store").iterdir()
    report = json.loads((artifact / "meta" / "verify.json").read_text())
    assert report["ok"] and report["checks"]["cuda"] == "pass", report
    assert report["files"]["prefix/lib/libcudademo.so"]["cuda"] == ["compute_90", "sm_90"]
    # A second checkout at another path, fresh build trees, still without the system CUDA:
    # both objects (the .cu one through CMAKE_CUDA_COMPILER_LAUNCHER) from the compile cache.
    second = tmp_path / "elsewhere" / "deeper" / "checkout-two"
    shutil.copytree(REPO / "recipes" / "cudademo", second)
    for d in ("store", "build"):
        shutil.rmtree(store / d)
    res = without_system_cuda(doit_argv(project, *build, f"source={second}"), tmp_path / "empty",
                              project)
    again = DoitResult(res.returncode, res.stdout, res.stderr)
    assert again.returncode == 0, again.output
    assert BUILT.search(again.output)[1] == m[1], again.output
    assert SUMMARY.search(again.output).groups() == ("2", "0"), again.output
    # The machine as it is (its CUDA visible, where it has one): the same artifact id.
    seen = run_doit(project, *build)
    assert seen.returncode == 0, seen.output
    assert BUILT.search(seen.output)[1] == m[1], seen.output


def test_an_architecture_the_locked_nvcc_lacks_is_one_line_before_any_compile(
        session_cuda_toolchain: Path, tmp_path: Path) -> None:
    project = copy_project(tmp_path / "project")
    store = make_store(tmp_path / "store", session_cuda_toolchain)
    recipe = project / "recipes" / "cudademo.toml"
    recipe.write_text(recipe.read_text().replace('CMAKE_CUDA_ARCHITECTURES = "90"',
                                                 'CMAKE_CUDA_ARCHITECTURES = "60;90"'))
    res = run_doit(project, "build", "recipe=cudademo", "variant=release", f"store={store}",
                   "substitute=0")
    assert res.returncode == 2, res.output
    [line] = [ln for ln in res.stderr.splitlines() if "CUDA architecture" in ln]
    assert ("recipes/cudademo.toml variant release: CUDA architecture '60' "
            "(CMAKE_CUDA_ARCHITECTURES) is not supported by the locked nvcc 13.0.88") in line
    assert "it supports: 75 80 86" in line and "Traceback" not in res.output
    assert "configure" not in res.output and not list(store.glob("build/cudademo*/**/*.o"))
    assert not (store / "store").exists() or not any((store / "store").iterdir())


def test_check_architectures_reads_cmake_entries() -> None:
    have = ["sm_80", "sm_90", "compute_80", "compute_90"]
    for ok in ("90", "80-real;90-virtual", "all", "all-major", "80,90"):
        check_architectures(ok, have, "13.0.88", "r")
    for bad, says in (("70", "'70'"), ("100-virtual", "'100-virtual'"), ("sm_90", "not an architecture")):
        with pytest.raises(UserError, match=says):
            check_architectures(bad, have, "13.0.88", "r")


def test_a_cuda_recipe_on_a_lock_without_a_toolkit_is_one_line(session_toolchain: Path,
                                                                 tmp_path: Path) -> None:
    project = copy_project(tmp_path / "project")
    store = make_store(tmp_path / "store", session_toolchain)
    recipe = project / "recipes" / "cudademo.toml"
    before = recipe.read_text()
    recipe.write_text(before.replace('lock = "cuda13"\n', 'lock = "toolchain"\n')
                      .replace('"cuda:toolkit", ', ""))
    res = run_doit(project, "build", "recipe=cudademo", "variant=release", f"store={store}",
                   "substitute=0")
    assert res.returncode == 2, res.output
    [line] = [ln for ln in res.stderr.splitlines() if "asks for CUDA" in ln]
    assert line.startswith("error: recipes/cudademo.toml: asks for CUDA (the define CMAKE_CUDA_ARCHITECTURES) "
                           "but locks/toolchain.lock.json has no CUDA toolkit; set lock = \"cuda13\"")
    assert "Traceback" not in res.output and not list(store.glob("build/cudademo*"))
    # On the CUDA lock without `cuda:toolkit` in build.uses: the toolkit would not be in the id.
    recipe.write_text(before.replace('"cuda:toolkit", ', ""))
    res = run_doit(project, "build", "recipe=cudademo", "variant=release", f"store={store}",
                   "substitute=0")
    assert res.returncode == 2 and "build.uses lacks 'cuda:toolkit'" in res.stderr, res.output


def test_a_cuda_spec_without_nvcc_or_with_a_bad_requirement_is_one_line() -> None:
    from orchestrator.lock.resolve import cuda_toolkit_entry
    from orchestrator.model.lock import CudaSpec, PypiEntry

    pin = PypiEntry(name="nvidia-cuda-runtime", version="13.0.96", filename="x.whl", sha256="0" * 64)
    with pytest.raises(UserError, match=r"locks/x.toml: \[cuda\] requirements lack nvidia-cuda-nvcc"):
        cuda_toolkit_entry(CudaSpec(requirements=["nvidia-cuda-runtime==13.0.96"]), [pin],
                           Path("locks/x.toml"))
    with pytest.raises(UserError, match=r"is not a requirement"):
        cuda_toolkit_entry(CudaSpec(requirements=["nvidia cuda nvcc"]), [pin], Path("locks/x.toml"))


def test_the_toolkit_is_in_the_toolchain_hash_and_cudademo_s_inputs() -> None:
    from orchestrator.lock.files import load_lock
    from orchestrator.model.recipe import load_recipe
    from orchestrator.plan.derivation import used_keys
    from orchestrator.toolchain.materialize import toolchain_hash

    lock = load_lock(REPO / "locks", "cuda13")
    entry = lock.entries["cuda:toolkit"]
    assert entry.version == "13.0.88" and entry.root == "nvidia/cu13"
    assert all(entry.packages[n] == lock.entries[f"pypi:{n}"].sha256 for n in entry.packages)
    assert {"nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-crt", "nvidia-cuda-runtime",
            "nvidia-cuda-cccl"} == set(entry.packages)
    other = entry.model_copy(update={"packages": {**entry.packages, "nvidia-cuda-nvcc": "1" * 64}})
    moved = lock.model_copy(update={"entries": {**lock.entries, "cuda:toolkit": other}})
    assert toolchain_hash(moved) != toolchain_hash(lock) and other.digest() != entry.digest()
    recipe = load_recipe(REPO / "recipes", "cudademo")
    assert recipe.lock == "cuda13" and "cuda:toolkit" in used_keys(recipe)
    default = load_lock(REPO / "locks", "toolchain")
    assert not any(k.startswith(("cuda:", "compiler:nvcc")) or "nvidia" in k for k in default.entries)
