"""The PyTorch 2.x recipe (recipes/pytorch2.toml) on the real 2.6.0 source: Debian trixie's
tarball + fmt/cpp-httplib/kineto/pocketfft/gloo overlays + four patches, configured whole
against this machine's system libraries with KINETO and distributed (gloo) on; c10 and a fixed
sample of six torch_cpu objects built in one variant with real cmake/ninja/gcc.

Needs the set-up (.ci/pytorch-prereqs.sh: build-deps + every pinned tarball): a missing or
mismatched archive fails, it never skips. Configure is about 2-3 minutes on 2 cores, c10 and
the sample several more.
"""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, copy_project, run_doit
from elftools.elf.elffile import ELFFile
from torch_layout import compiled_layout

from orchestrator.model.bench import BenchReport
from orchestrator.model.recipe import load_recipe
from orchestrator.sources.archives import obtain_archive
from orchestrator.store.artifacts import Store

pytestmark = pytest.mark.pytorch


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("pytorch2")
    store = Store(root / "store").ensure()
    recipe = load_recipe(REPO / "recipes", "pytorch2")
    # The set-up (.ci/pytorch-prereqs.sh) fetched every pinned archive: a missing or
    # mismatched one fails here, never skips (tests/test_prefetch.py names which).
    for archive in (recipe.source, *recipe.source.overlays):
        obtain_archive(archive, store)
    return {"root": root, "store": store.root, "project": copy_project(root / "project")}


def cache_entry(cmake_cache: Path, key: str) -> str:
    m = re.search(rf"^{key}:[A-Z]+=(.*)$", cmake_cache.read_text(), re.M)
    assert m, key
    return m[1]


# A fixed sample of torch_cpu: the edit loop's file, conv2d's entry, the backends the recipe
# turns on (KINETO's profiler shim, gloo's process group) and the FFT through the pocketfft
# overlay; and at::cpu's Utils.cpp, which needs recipes/pytorch2/patches/0005 against
# bookworm's cpuinfo. Each pulls in the whole ATen code generation first.
TORCH_CPU_SAMPLE = tuple(f"caffe2/CMakeFiles/torch_cpu.dir/__/{o}.o" for o in (
    "aten/src/ATen/native/BinaryOps.cpp",
    "aten/src/ATen/native/Convolution.cpp",
    "torch/csrc/profiler/kineto_shim.cpp",
    "torch/csrc/distributed/c10d/ProcessGroupGloo.cpp",
    "aten/src/ATen/native/mkl/SpectralOps.cpp",
    "aten/src/ATen/cpu/Utils.cpp",
))


def test_pytorch2_c10_and_torch_cpu_sample_relwithdebinfo(world):
    targets = ",".join(("c10", *TORCH_CPU_SAMPLE))
    res = run_doit(world["project"], "build", "format=json", "recipe=pytorch2",
                   "variant=relwithdebinfo", f"targets={targets}", "substitute=0",
                   f"store={world['store']}", timeout=3000)
    assert res.returncode == 0, res.output[-4000:]
    art = Path(json.loads(res.stdout.strip().splitlines()[-1])["path"])
    meta = art / "meta"
    lib = art / "prefix/lib/libc10.so"
    assert lib.is_file()
    with open(lib, "rb") as f:
        sections = {s.name for s in ELFFile(f).iter_sections()}
    assert {".debug_info", ".debug_line"} <= sections
    # Linked by the lock's mold (recipes/pytorch2.toml: linker = "mold").
    comment = subprocess.run(["readelf", "-p", ".comment", str(lib)], capture_output=True,
                             text=True, check=True).stdout
    assert "mold 1.10.1" in comment, comment
    assert cache_entry(meta / "CMakeCache.txt", "CMAKE_BUILD_TYPE") == "RelWithDebInfo"
    assert cache_entry(meta / "CMakeCache.txt", "TORCH_BUILD_VERSION") == "2.6.0"
    info = json.loads((meta / "pytorch.json").read_text())
    defines = info["defines"]
    assert info["torch_version"] == "2.6.0"
    # The backends: distributed with the bundled gloo, KINETO on; the rest of the system
    # libraries one by one (USE_SYSTEM_LIBS would force bookworm's too-old gloo).
    assert defines["USE_DISTRIBUTED"] == "1" and defines["USE_SYSTEM_GLOO"] == "OFF"
    assert defines.get("USE_KINETO", "1") != "0" and "USE_SYSTEM_LIBS" not in defines
    assert defines["USE_SYSTEM_SLEEF"] == "ON" and defines["USE_SYSTEM_CPUINFO"] == "ON"
    cache = (meta / "CMakeCache.txt")
    assert cache_entry(cache, "USE_KINETO") == "ON" and cache_entry(cache, "USE_GLOO") == "ON"
    [tree] = (Path(world["store"]) / "build").glob("pytorch2-relwithdebinfo-*")
    for obj in TORCH_CPU_SAMPLE:
        with open(tree / obj, "rb") as f:
            assert ELFFile(f).get_section_by_name(".debug_info") is not None, obj
    assert json.loads((meta / "verify.json").read_text())["ok"]
    # Built from a per-build copy of the pinned tree (which stays as unpacked), named
    # /orch/src/pytorch2 in debug info as a checkout is.
    assert json.loads((art / "manifest.json").read_text())["prefix_map"] == {
        "/orch/src/pytorch2": "source",
        "/orch/build/pytorch2-relwithdebinfo": "build"}
    # The whole tree was configured: torch_cpu's and torch_python's sources are in the graph.
    commands = json.loads((meta / "compile_commands.json").read_text())
    files = {c["file"] for c in commands}
    assert any(f.endswith("torch/csrc/Module.cpp") for f in files)
    assert any(f.endswith("aten/src/ATen/native/mkl/SpectralOps.cpp") for f in files)
    # Each c10 compile line: -O2 once, -g once (patch 0004), the prefix maps.
    for c in commands:
        if "/c10/" in c["file"] and c["file"].endswith(".cpp"):
            argv = c["command"].split()
            assert [a for a in argv if re.match(r"^-O[0-3sgz]?$", a)] == ["-O2"], c["command"]
            assert argv.count("-g") == 1, c["command"]
    res = run_doit(world["project"], "verify", "recipe=pytorch2", "variant=relwithdebinfo",
                   f"targets={targets}", f"store={world['store']}", timeout=900)
    assert res.returncode == 0, res.output[-3000:]
    readelf = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True).stdout
    assert "$ORIGIN" in readelf
    # The debugger printers' 2.6.0 layout, against this tree's own installed c10 headers.
    from orchestrator.ide.debugger_scripts import torch_types as tt
    got = compiled_layout(art / "prefix/include", world["root"], std="c++17")
    assert got.pop("device_types") == len(tt.DEVICE_TYPES)
    assert got.pop("scalar_types") <= len(tt.SCALAR_TYPES) + 1     # 2.6 knows fewer dtypes
    assert got == tt.LAYOUTS["2.6.0"]


def test_pytorch2_recipe_on_a_git_checkout_of_the_26_tree(world):
    """source=PATH: a git checkout of the same upstream 2.6.0 tree (third_party emptied, as a
    fresh clone without submodules would be) builds with the recipe's overlays and patches
    applied to a copy, at its own version, and stays untouched."""
    store = Store(world["store"])
    recipe = load_recipe(REPO / "recipes", "pytorch2")
    tarball = obtain_archive(recipe.source, store)
    co = world["root"] / "pytorch-checkout"
    co.mkdir()
    subprocess.run(["tar", "-xf", str(tarball), "-C", str(co), "--strip-components=1",
                    "--no-same-owner"], check=True)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main",
           "-C", str(co)]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "v2.6.0"]):
        subprocess.run([*git, *args], check=True)
    rev = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                         check=True).stdout.strip()
    res = run_doit(world["project"], "build", "format=json", "recipe=pytorch2",
                   "variant=relwithdebinfo", "targets=c10", "substitute=0", f"source={co}",
                   f"store={world['store']}", timeout=3000)
    assert res.returncode == 0, res.output[-4000:]
    art = Path(json.loads(res.stdout.strip().splitlines()[-1])["path"])
    assert (art / "prefix/lib/libc10.so").is_file()
    assert cache_entry(art / "meta/CMakeCache.txt", "TORCH_BUILD_VERSION") == f"2.6.0a0+git{rev[:7]}"
    ident = json.loads((art / "manifest.json").read_text())["derivation"]["source"]
    assert ident["kind"] == "git-checkout" and ident["rev"] == rev
    assert [o["path"] for o in ident["overlays"]] == [
        "third_party/fmt", "third_party/cpp-httplib", "third_party/kineto", "third_party/gloo",
        "third_party/pocketfft", "third_party/nlohmann"]
    assert [p["name"] for p in ident["patches"]] == [Path(p).name for p in recipe.source.patches]
    assert len(ident["patches"]) == 7
    status = subprocess.run([*git, "status", "--porcelain", "--ignored"], capture_output=True,
                            text=True, check=True).stdout
    assert status == "" and not (co / "third_party" / "fmt").exists()


def test_bench_and_run_two_c10_slices_by_id(world, tmp_path):
    """`doit bench ids=A,B` of the two partial (targets=) builds the tests above made: c10 (+ the
    torch_cpu sample) from the pinned tree, and c10 from the git checkout. The command is
    docs/examples/c10_bench.sh: c10_bench.cpp built against each artifact's own headers and
    linked to its own libc10.so (RUNPATH); its runs print ns_per_op. The report holds each
    side's store libraries, from the loader's trace: its own libc10.so only. A command that
    loads the other artifact's libc10.so is caught: exit 1 naming the side."""
    entries = {json.loads((p / "manifest.json").read_text())["derivation"]["source"]["kind"]: p
               for p in (Path(world["store"]) / "store").glob("*-pytorch2-relwithdebinfo")}
    assert set(entries) == {"archive", "git-checkout"}, entries  # built by the two tests above
    pinned, checkout = entries["archive"].resolve(), entries["git-checkout"].resolve()
    ids = f"ids={pinned.name[:8]},{checkout.name[:8]}"
    env = {"C10_BENCH_CACHE": str(tmp_path / "drivers")}
    driver = ["sh", str(REPO / "docs/examples/c10_bench.sh")]
    store = f"store={world['store']}"
    res = run_doit(world["project"], "bench", ids, "metric=ns_per_op", "rounds=2", "allow_noisy=1",
                   f"plot={tmp_path / 'c10.svg'}", "format=json", store, "--", *driver,
                   "tensorimpl", "20000", env=env, timeout=900)
    assert res.returncode == 0, res.output[-3000:]
    report = BenchReport.model_validate_json(res.stdout.strip().splitlines()[-1])
    assert (report.a.id, report.b.id) == (pinned.name[:40], checkout.name[:40])
    assert report.a.libraries == [str(pinned / "prefix/lib/libc10.so")], report.a
    assert report.b.libraries == [str(checkout / "prefix/lib/libc10.so")], report.b
    assert report.a.n == report.b.n == 2 and min(report.a.samples + report.b.samples) > 0
    changed = {d.path for d in report.differences}
    assert {"variant.targets", "source.kind"} <= changed, changed
    # doit run id=: the driver (already built for this entry) maps the checkout's libc10.so.
    res = run_doit(world["project"], "run", f"id={checkout.name[:8]}", store, "--", *driver,
                   "strings", "1000", env=env, timeout=900)
    assert res.returncode == 0, res.output[-3000:]
    assert json.loads(res.stdout.strip().splitlines()[-1])["libc10"] == \
        str(checkout / "prefix/lib/libc10.so"), res.stdout
    # The trap: a command that loads the other artifact's library in the pinned side.
    mixing = f"import ctypes; ctypes.CDLL({str(checkout / 'prefix/lib/libc10.so')!r})"
    res = run_doit(world["project"], "bench", ids, "rounds=2", f"plot={tmp_path / 'mixed.svg'}",
                   store, "--", "python", "-c", mixing, timeout=900)
    assert res.returncode == 1, res.output[-3000:]
    assert f"the command in {pinned.name[:8]} loaded another artifact's library " \
           f"({checkout}/prefix/lib/libc10.so)" in res.output, res.output[-3000:]
