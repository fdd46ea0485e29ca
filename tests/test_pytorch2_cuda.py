"""PyTorch 2.6.0's CUDA kernels (issue 32, item 3): recipes/pytorch2-cuda.toml configures the
real 2.6.0 tree against the locked CUDA 12.4 toolkit (locks/pytorch2-cuda12.toml: Debian's
packages, no system CUDA) and compiles, through targets=, c10_cuda (and c10) and one ATen kernel,
UpSampleNearest2d.cu, for TORCH_CUDA_ARCH_LIST=9.0: compile only, no GPU. verify reads the
kernel's fatbin (kept in meta/objects/). The larger sample (an elementwise kernel, a reduction,
a cuBLAS caller) and the compile cache's hit rate from a second checkout are measured by hand:
benchmarks/pytorch_cuda_cache.py.

Needs the set-up (.ci/pytorch-prereqs.sh) and the CUDA debs (bootstrap.sh fetches them into the
machine's deb cache). Configure is several minutes on 2 cores, the kernel a few more.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import REPO, copy_project, run_doit

from orchestrator.model.recipe import load_recipe
from orchestrator.sources.archives import obtain_archive
from orchestrator.store.artifacts import Store
from orchestrator.verify import VerifyConfig, verify_tree
from orchestrator.verify.elf import read_elf
from orchestrator.verify.fatbin import fatbin_images

pytestmark = pytest.mark.pytorch

KERNEL = "caffe2/CMakeFiles/torch_cuda.dir/__/aten/src/ATen/native/cuda/UpSampleNearest2d.cu.o"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("pytorch2cuda")
    store = Store(root / "store").ensure()
    recipe = load_recipe(REPO / "recipes", "pytorch2-cuda")
    for archive in (recipe.source, *recipe.source.overlays):
        obtain_archive(archive, store)
    return {"root": root, "store": store.root, "project": copy_project(root / "project")}


def cache_entry(cmake_cache: Path, key: str) -> str:
    m = re.search(rf"^{key}:[A-Z]+=(.*)$", cmake_cache.read_text(), re.M)
    assert m, key
    return m[1]


@pytest.fixture(scope="module")
def built(world):
    """c10 and c10_cuda (which links it) and UpSampleNearest2d.cu, relwithdebinfo: the
    artifact's directory."""
    res = run_doit(world["project"], "build", "format=json", "recipe=pytorch2-cuda",
                   "variant=relwithdebinfo", f"targets=c10,c10_cuda,{KERNEL}", "substitute=0",
                   f"store={world['store']}", timeout=5400)
    assert res.returncode == 0, res.output[-4000:]
    return Path(json.loads(res.stdout.strip().splitlines()[-1])["path"])


def test_c10_cuda_and_an_aten_kernel_against_the_locked_cuda_12_4(world, built):
    meta = built / "meta"
    cache = meta / "CMakeCache.txt"
    toolchain = Path(cache_entry(cache, "CMAKE_CUDA_COMPILER")).parents[2]
    # The locked toolkit (<toolchain>/cuda from Debian's packages), not a system CUDA.
    assert cache_entry(cache, "CMAKE_CUDA_COMPILER") == f"{toolchain}/cuda/bin/nvcc"
    assert (toolchain / "toolchain.json").is_file()
    assert cache_entry(cache, "CUDA_VERSION") == "12.4"
    assert cache_entry(cache, "FIND_PACKAGE_MESSAGE_DETAILS_CUDAToolkit").startswith(
        f"[{toolchain}/cuda/include][12.4.131]")
    assert cache_entry(cache, "CMAKE_CUDA_HOST_COMPILER").endswith("g++")
    assert cache_entry(cache, "USE_CUDA") == "1" and cache_entry(cache, "USE_CUDNN") == "OFF"
    assert cache_entry(cache, "USE_FLASH_ATTENTION") == "0" and cache_entry(cache, "USE_NCCL") == "0"
    assert "/usr/local/cuda" not in cache.read_text()
    info = json.loads((meta / "pytorch.json").read_text())
    assert info["env"]["TORCH_CUDA_ARCH_LIST"] == "9.0"
    assert (built / "prefix/lib/libc10_cuda.so").is_file()
    # The kernel: an sm_90 cubin and no PTX (9.0, not 9.0+PTX), kept for verify.
    kept = meta / "objects" / KERNEL
    assert [str(i) for i in fatbin_images(kept, read_elf(kept, symbols=False))] == ["sm_90"]
    report = json.loads((meta / "verify.json").read_text())
    assert report["ok"] and report["checks"]["cuda"] == "pass", report
    # Its compile line: nvcc for sm_90 only, device line tables (relwithdebinfo), the host
    # code's prefix maps through -Xcompiler.
    [line] = [c["command"] for c in json.loads((meta / "compile_commands.json").read_text())
              if c["file"].endswith("native/cuda/UpSampleNearest2d.cu")]
    assert f"{toolchain}/cuda/bin/nvcc" in line and "-lineinfo" in line and " -G " not in line
    assert re.findall(r"arch=compute_(\d+)", line) == ["90"], line
    assert "-Xcompiler=-ffile-prefix-map=" in line


def test_verify_reads_the_kept_kernels_fatbin(built, tmp_path):
    """The same artifact checked for another arch list: the kept object is named."""
    cfg = VerifyConfig(artifact="pytorch2-cuda", root=built, prefix=built / "prefix",
                       defines={"TORCH_CUDA_ARCH_LIST": "8.0;9.0+PTX"},
                       cuda_objects=[built / "meta" / "objects" / KERNEL], roots=[])
    report = verify_tree(cfg)
    [finding] = [f for f in report.findings if f.check == "cuda"]
    assert finding.file == f"meta/objects/{KERNEL}" and finding.severity == "fail"
    assert "lacks compute_90, sm_80" in finding.cause, finding.cause


def bad_recipe(world, tmp_path: Path, old: str, new: str) -> Path:
    project = copy_project(tmp_path / "project")
    recipe = project / "recipes" / "pytorch2-cuda.toml"
    text = recipe.read_text()
    assert old in text
    recipe.write_text(text.replace(old, new))
    return project


def test_an_arch_the_locked_nvcc_lacks_is_one_line_before_any_compile(world, built, tmp_path):
    project = bad_recipe(world, tmp_path, 'cuda_arch_list = "9.0"', 'cuda_arch_list = "3.5;9.0"')
    before = set((Path(world["store"]) / "build").iterdir())
    res = run_doit(project, "build", "recipe=pytorch2-cuda", "variant=relwithdebinfo",
                   "targets=c10_cuda", "substitute=0", f"store={world['store']}", timeout=900)
    assert res.returncode == 2, res.output[-3000:]
    [line] = [ln for ln in res.stderr.splitlines() if "CUDA architecture" in ln]
    assert line.startswith("error: recipes/pytorch2-cuda.toml variant relwithdebinfo: CUDA "
                           "architecture '3.5' (TORCH_CUDA_ARCH_LIST) is not supported by the "
                           "locked nvcc 12.4.131; it supports: 50 52"), line
    assert "Traceback" not in res.output and "configure" not in res.output
    assert set((Path(world["store"]) / "build").iterdir()) == before  # no tree, no copy


def test_cuda_without_a_toolkit_in_the_lock_is_one_line(world, tmp_path):
    project = bad_recipe(world, tmp_path, 'lock = "pytorch2-cuda12"', 'lock = "pytorch2"')
    res = run_doit(project, "build", "recipe=pytorch2-cuda", "variant=relwithdebinfo",
                   "targets=c10_cuda", "substitute=0", f"store={world['store']}", timeout=900)
    assert res.returncode == 2, res.output[-3000:]
    [line] = [ln for ln in res.stderr.splitlines() if "asks for CUDA" in ln]
    assert line.startswith("error: recipes/pytorch2-cuda.toml: asks for CUDA (build.uses "
                           "'cuda:toolkit') but locks/pytorch2.lock.json has no CUDA toolkit"), line
    assert "Traceback" not in res.output
