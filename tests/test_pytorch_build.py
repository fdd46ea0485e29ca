"""The PyTorch recipe on the real 1.13.1 source (Debian's tarball + fmt overlay + foxi patch),
c10 only, with real cmake/ninja/gcc: variants in separate incremental build trees, debug info
by variant, a developer checkout switched between variants, one-file incremental rebuilds.

Needs .ci/pytorch-prereqs.sh (build-deps + tarballs); skips only when the tarballs cannot
be had. About 5 minutes on 2 cores.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, copy_project, run_doit
from elftools.elf.elffile import ELFFile
from filelock import FileLock

from orchestrator.model.bench import BenchReport
from orchestrator.model.recipe import load_recipe
from orchestrator.sources.archives import obtain_archive
from orchestrator.store.artifacts import Store

pytestmark = pytest.mark.pytorch
C10 = ("recipe=pytorch", "targets=c10", "substitute=0")
# c10 plus the codegen targets (ATen Register*.cpp in the build tree, autograd in the source).
WITH_CODEGEN = "c10,ATEN_CPU_FILES_GEN_TARGET,generate-torch-sources"
LEAK_ENV = {"CFLAGS": "-DORCH_LEAKED_FROM_SHELL", "CXXFLAGS": "-DORCH_LEAKED_FROM_SHELL",
            "PYTORCH_BUILD_VERSION": "9.9.9", "PYTORCH_BUILD_NUMBER": "1", "USE_CUDA": "1",
            "CMAKE_BUILD_TYPE": "Debug"}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """One project copy and store for the module (the unpacked tree and toolchain are shared)."""
    root = tmp_path_factory.mktemp("pytorch")
    store = Store(root / "store").ensure()
    recipe = load_recipe(REPO / "recipes", "pytorch")
    # The set-up (.ci/pytorch-prereqs.sh) fetched every pinned archive: a missing or
    # mismatched one fails here, never skips (tests/test_prefetch.py names which).
    for archive in (recipe.source, *recipe.source.overlays):
        obtain_archive(archive, store)
    project = copy_project(root / "project")
    world = {"root": root, "store": store.root, "project": project}
    # Unpack the pinned tree (no build) and fingerprint it before anything builds from it.
    res = run_doit(project, "build", "format=json", "recipe=pytorch", "targets=no_such_target",
                   "variant=release", "substitute=0", f"store={store.root}", timeout=900)
    assert res.returncode == 2, res.output[-2000:]
    [tree] = list((store.root / "sources").iterdir())
    world["pristine"] = tree_fingerprint(tree)
    return world


def doit(world, *args: str, env: dict[str, str] | None = None):
    return run_doit(world["project"], *args, f"store={world['store']}", env=env, timeout=900)


def build(world, *args: str, env: dict[str, str] | None = None, targets: str = "c10") -> dict:
    res = doit(world, "build", "format=json", "recipe=pytorch", f"targets={targets}",
               "substitute=0", *args, env=env)
    assert res.returncode == 0, res.output[-4000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


OPT = re.compile(r"^-O[0-3sgz]?$")


def assert_flags(commands: list[dict], build_type: str) -> None:
    """Each c10 compile line carries exactly the variant's optimisation and debug flags, once."""
    wanted = {"Debug": (["-O0"], 1), "RelWithDebInfo": (["-O2"], 1), "Release": (["-O3"], 0)}
    opt, g = wanted[build_type]
    c10 = [c for c in commands if "/c10/" in c["file"] and c["file"].endswith(".cpp")]
    assert c10
    for c in c10:
        argv = c["command"].split()
        assert [a for a in argv if OPT.match(a)] == opt, (build_type, c["file"], c["command"])
        assert argv.count("-g") == g, (build_type, c["command"])
        ndebug = argv.count("-DNDEBUG")
        assert ndebug == (0 if build_type == "Debug" else 1), (build_type, c["command"])
        maps = [a for a in argv if a.startswith("-ffile-prefix-map=")]
        # The source, the build tree, then the tree's `source` (the pinned tree's copy, or a
        # checkout's link), absolute and relative, to /orch/src/pytorch (the last map wins).
        assert len(maps) == 4 and maps[3] == "-ffile-prefix-map=source=/orch/src/pytorch", maps
        assert maps[2].endswith("/source=/orch/src/pytorch"), maps


def c10_sources_in_dwarf(lib: Path) -> set[str]:
    """Where the DWARF of a library's c10 compile units names their sources (DW_AT_name,
    after DW_AT_comp_dir when relative)."""
    names = set()
    with open(lib, "rb") as f:
        for cu in ELFFile(f).get_dwarf_info().iter_CUs():
            top = cu.get_top_DIE().attributes
            name = top["DW_AT_name"].value.decode()
            if not name.startswith("/"):
                name = f"{top['DW_AT_comp_dir'].value.decode()}/{name}"
            if "/c10/" in name and name.endswith(".cpp"):
                names.add(name)
    return names


def tree_fingerprint(tree: Path) -> str:
    """sha256 over every path, mode and content of a tree (what `pristine` means)."""
    import hashlib
    h = hashlib.sha256()
    for p in sorted(tree.rglob("*")):
        rel = p.relative_to(tree).as_posix()
        if p.is_symlink():
            h.update(f"l {rel} {os.readlink(p)}\n".encode())
        elif p.is_file():
            h.update(f"f {rel} {p.stat().st_mode:o} ".encode() + hashlib.sha256(p.read_bytes()).digest())
        else:
            h.update(f"d {rel}\n".encode())
    return h.hexdigest()


def debug_sections(lib: Path) -> set[str]:
    with open(lib, "rb") as f:
        return {s.name for s in ELFFile(f).iter_sections() if s.name.startswith(".debug")}


def cache_entry(cmake_cache: Path, key: str) -> str:
    m = re.search(rf"^{key}:[A-Z]+=(.*)$", cmake_cache.read_text(), re.M)
    assert m, key
    return m[1]


def ninja_steps(build_log: Path) -> list[str]:
    return [ln for ln in build_log.read_text().splitlines() if re.match(r"^\[\d+/\d+\] ", ln)]


def test_pinned_source_c10_per_variant(world):
    rel = build(world, "variant=relwithdebinfo", env=LEAK_ENV, targets=WITH_CODEGEN)
    art = Path(rel["path"])
    meta = art / "meta"
    lib = art / "prefix/lib/libc10.so"
    # Build type, debug info, and the leaking shell environment kept out.
    assert cache_entry(meta / "CMakeCache.txt", "CMAKE_BUILD_TYPE") == "RelWithDebInfo"
    assert cache_entry(meta / "CMakeCache.txt", "TORCH_BUILD_VERSION") == "1.13.1"
    assert cache_entry(meta / "CMakeCache.txt", "USE_CUDA") in ("0", "OFF")
    assert {".debug_info", ".debug_line"} <= debug_sections(lib)
    commands = json.loads((meta / "compile_commands.json").read_text())
    assert any(c["file"].endswith("c10/util/Exception.cpp") for c in commands)
    blob = (meta / "compile_commands.json").read_text() + (meta / "CMakeCache.txt").read_text()
    assert "ORCH_LEAKED_FROM_SHELL" not in blob and "9.9.9" not in blob
    # The pinned source builds from a copy inside the build tree, named in debug info as a
    # checkout is (/orch/src/pytorch: its objects serve a checkout's build from the compile
    # cache, issue 33); the mapping is in the manifest.
    manifest = json.loads((art / "manifest.json").read_text())
    assert manifest["prefix_map"] == {"/orch/src/pytorch": "source",
                                      "/orch/build/pytorch-relwithdebinfo": "build"}
    data = lib.read_bytes()
    assert b"/orch/build/pytorch-relwithdebinfo" in data and b"/orch/src/pytorch/c10/util" in data
    assert b"/orch/build/pytorch-relwithdebinfo/source" not in data
    pinned_names = c10_sources_in_dwarf(lib)
    assert "/orch/src/pytorch/c10/util/Exception.cpp" in pinned_names
    assert all(n.startswith("/orch/src/pytorch/c10/") for n in pinned_names), sorted(pinned_names)[:5]
    assert str(world["store"]).encode() not in data
    assert_flags(commands, "RelWithDebInfo")
    info = json.loads((meta / "pytorch.json").read_text())
    assert info["driver"] == "setuptools" and info["glibcxx_use_cxx11_abi"] == "1"
    # torch/version.py (tools/generate_torch_version.py) gets the recipe's version, as setup.py
    # passes it: the shell's 9.9.9 never reaches the build, version.txt's 1.13.0a0 is not used.
    assert info["env"]["PYTORCH_BUILD_VERSION"] == "1.13.1", info["env"]
    assert info["defines"]["USE_SYSTEM_LIBS"] == "ON" and info["defines"]["BUILD_TEST"] == "False"
    # Generated sources a debugger steps into, at their logical path under meta/:
    # ATen's registrations (build tree), autograd's kernels (the source copy: /orch/src).
    gen = meta / "build/pytorch-relwithdebinfo"
    assert (gen / "c10/macros/cmake_macros.h").is_file()
    assert (gen / "aten/src/ATen/RegisterCPU.cpp").is_file()
    # ... and torch.add's CPU kernel, where a breakpoint on add_kernel stops (full build).
    assert (gen / "aten/src/ATen/UfuncCPUKernel_add.cpp").is_file()
    assert (meta / "src/pytorch/torch/csrc/autograd/generated/VariableType_0.cpp").is_file()
    assert (art / "prefix/include/c10/core/TensorImpl.h").is_file()
    assert "$ORIGIN" in subprocess.run(["readelf", "-d", str(lib)], capture_output=True,
                                       text=True).stdout
    # The pinned source's identity: tarball, overlay and the ordered patches.
    src = manifest["derivation"]["source"]
    assert src["kind"] == "archive"
    assert [o["path"] for o in src["overlays"]] == ["third_party/fmt", "third_party/kineto",
                                                   "third_party/pocketfft"]
    assert [p["name"] for p in src["patches"]][:2] == ["0001-drop-foxi.patch",
                                                       "0002-fmt9-format-to.patch"]
    verify = json.loads((meta / "verify.json").read_text())
    assert verify["ok"], verify

    release = build(world, "variant=release")
    rart = Path(release["path"])
    assert cache_entry(rart / "meta/CMakeCache.txt", "CMAKE_BUILD_TYPE") == "Release"
    assert_flags(json.loads((rart / "meta/compile_commands.json").read_text()), "Release")
    assert not debug_sections(rart / "prefix/lib/libc10.so")
    assert release["id"] != rel["id"]
    trees = sorted(p.name for p in (world["store"] / "build").iterdir())
    assert [t.rsplit("-", 1)[0] for t in trees] == ["pytorch-release", "pytorch-relwithdebinfo"]
    caches = {t: cache_entry(world["store"] / "build" / t / "CMakeCache.txt", "CMAKE_BUILD_TYPE")
              for t in trees}
    assert {t.rsplit("-", 1)[0]: v for t, v in caches.items()} == {
        "pytorch-release": "Release", "pytorch-relwithdebinfo": "RelWithDebInfo"}
    # The unpacked tree: fmt overlaid, foxi patched out, made only once, and pristine:
    # codegen, version.h, Config.h and __pycache__ went into the build trees' copies.
    [tree] = list((world["store"] / "sources").iterdir())
    assert tree_fingerprint(tree) == world["pristine"]
    assert not (tree / "torch/csrc/autograd/generated").exists()
    assert not list(tree.rglob("__pycache__"))
    assert (tree / "third_party/fmt/include/fmt/core.h").is_file()
    assert "third_party/foxi EXCLUDE_FROM_ALL" not in (tree / "cmake/Dependencies.cmake").read_text()
    assert "std::back_inserter(buf)" in (tree / "torch/csrc/Exceptions.cpp").read_text()
    # Same inputs again: the store answers, nothing is configured or compiled.
    again = build(world, "variant=relwithdebinfo", targets=WITH_CODEGEN)
    assert again["origin"] == "present" and again["id"] == rel["id"]


def make_checkout(world) -> Path:
    """A developer's git checkout of the same tree (what `source=PATH` is for)."""
    [tree] = list((world["store"] / "sources").iterdir())
    co = world["root"] / "src" / "pytorch"
    shutil.copytree(tree, co, symlinks=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "1.13.1"]):
        subprocess.run(["git", "-C", str(co), *args], check=True, capture_output=True, env=env)
    return co


def test_checkout_switch_rollback_and_one_file_rebuild(world):
    if not (world["store"] / "sources").is_dir():
        build(world, "variant=release")
    # The pinned tree's relwithdebinfo (built by the test above: present then).
    pinned = build(world, "variant=relwithdebinfo", targets=WITH_CODEGEN)
    co = make_checkout(world)
    ws = f"workspace={co}"
    # A checkout of the pinned tree is answered by the pinned build's compile-cache entries
    # (issue 33): both compile `source/...` (the copy; the checkout's link), and both name it
    # /orch/src/pytorch in debug info, so a hit hands the checkout the right debug paths.
    res = doit(world, "build", "format=json", *C10, "variant=relwithdebinfo", f"source={co}")
    assert res.returncode == 0, res.output[-4000:]
    rel = json.loads(res.stdout.strip().splitlines()[-1])
    hits, misses = map(int, re.search(r"compile cache: (\d+) hit\(s\), (\d+) miss\(es\)",
                                      res.output).groups())
    print(f"checkout of the pinned tree: {hits} of {hits + misses} compiles from the pinned entries")
    assert hits > 50 and misses == 0, res.output[-2000:]
    assert json.loads((Path(rel["path"]) / "manifest.json").read_text())[
        "derivation"]["source"]["kind"] == "git-checkout"
    names = c10_sources_in_dwarf(Path(rel["path"]) / "prefix/lib/libc10.so")
    assert names == c10_sources_in_dwarf(Path(pinned["path"]) / "prefix/lib/libc10.so")
    assert "/orch/src/pytorch/c10/util/Exception.cpp" in names
    # The same tree at another path: the same id, and a rebuild there (its own build tree)
    # is answered by the compile cache: a checkout is configured through
    # <build tree>/source (a link), so its compile lines do not name the checkout's path.
    co2 = world["root"] / "elsewhere" / "pytorch"
    shutil.copytree(co, co2, symlinks=True)
    res = doit(world, "build", "format=json", *C10, "variant=relwithdebinfo", f"source={co2}",
               "rebuild=1")
    assert res.returncode == 0, res.output[-4000:]
    again = json.loads(res.stdout.strip().splitlines()[-1])
    assert again["id"] == rel["id"] and again["comparison"]["identical"] is True, again
    hits, misses = map(int, re.search(r"compile cache: (\d+) hit\(s\), (\d+) miss\(es\)",
                                      res.output).groups())
    assert hits > 50 and misses <= hits // 20, res.output[-2000:]   # >= 95 % hits
    [tree2] = [t for t in (world["store"] / "build").iterdir()
               if (t / "source").is_symlink() and os.readlink(t / "source") == str(co2)]
    [exception_cpp] = [c for c in json.loads((tree2 / "compile_commands.json").read_text())
                       if c["file"].endswith("c10/util/Exception.cpp")]
    assert exception_cpp["file"] == str(tree2 / "source/c10/util/Exception.cpp"), exception_cpp

    res = doit(world, "switch", "variant=relwithdebinfo", *C10, f"source={co}", ws)
    assert res.returncode == 0, res.output[-3000:]
    link = co / "torch/lib/libc10.so"
    assert link.is_symlink() and ".orch/profile/prefix/lib/libc10.so" in os.readlink(link)
    assert {".debug_info"} <= debug_sections(link)
    assert (co / "compile_commands.json").resolve() == \
        (Path(rel["path"]) / "meta/compile_commands.json").resolve()

    # The workspace links are not part of the checkout's identity: still the same artifact.
    assert build(world, "variant=relwithdebinfo", f"source={co}")["origin"] == "present"

    res = doit(world, "switch", "variant=release", *C10, f"source={co}", ws)
    assert res.returncode == 0, res.output[-3000:]
    assert not debug_sections(link)
    profile = co / ".orch/profile"
    assert cache_entry(profile / "meta/CMakeCache.txt", "CMAKE_BUILD_TYPE") == "Release"

    res = doit(world, "rollback", ws)
    assert res.returncode == 0, res.output
    assert cache_entry(profile / "meta/CMakeCache.txt", "CMAKE_BUILD_TYPE") == "RelWithDebInfo"
    assert {".debug_info"} <= debug_sections(link)

    # `doit bench` on the c10 slice, variants= with targets= and source= (both built above):
    # docs/examples/c10_bench.sh builds its driver against each side's headers, linked to
    # its libc10.so; the loader's trace shows each side loaded its own libc10.so only.
    res = run_doit(world["project"], "bench", "variants=relwithdebinfo,release", *C10,
                   f"source={co}", "metric=ns_per_op", "rounds=2", "allow_noisy=1",
                   f"plot={world['root'] / 'c10.svg'}", "format=json", f"store={world['store']}",
                   "--", "sh", str(REPO / "docs/examples/c10_bench.sh"), "strings", "20000",
                   env={"C10_BENCH_CACHE": str(world["root"] / "c10-bench")}, timeout=900)
    assert res.returncode == 0, res.output[-3000:]
    report = BenchReport.model_validate_json(res.stdout.strip().splitlines()[-1])
    assert report.a.id == rel["id"] and report.b.name.endswith("-pytorch-release"), report
    for side in (report.a, report.b):
        assert side.libraries == [str(Path(side.path).resolve() / "prefix/lib/libc10.so")], side
    assert {"path": "variant.build_type", "op": "~", "old": "RelWithDebInfo", "new": "Release"} \
        in [d.model_dump() for d in report.differences]

    # Dirty tree: one c10 .cpp changed → new identity, only that object and the link rerun.
    cpp = co / "c10/util/Exception.cpp"
    cpp.write_text(cpp.read_text() + "\nnamespace c10 { C10_API int orch_probe() { return 42; } }\n")
    res = doit(world, "build", "format=json", *C10, "variant=relwithdebinfo", f"source={co}")
    assert res.returncode == 0, res.output[-4000:]
    # The same command ran before (its plan memo) in this tree (its last ninja): that ninja
    # started before the planner, holding the tree's and the checkout's locks, and the
    # plan adopted it (head_start.py).
    assert "started ahead of the plan (head start)" in res.stderr, res.output[-3000:]
    locks = world["store"] / "locks"
    for lock in (*locks.glob("pytorch-source-*.lock"), *locks.glob("build-pytorch-*.lock")):
        FileLock(str(lock), timeout=0).acquire()  # all let go
    dirty = json.loads(res.stdout.strip().splitlines()[-1])
    assert dirty["origin"] == "built" and dirty["id"] != rel["id"]
    log = Path(dirty["path"]) / "meta/build.log"
    steps = ninja_steps(log)
    assert len(steps) == 2, steps
    # meta/ninja_log holds this build's steps only, not the tree's whole history.
    kept = (Path(dirty["path"]) / "meta/ninja_log").read_text().splitlines()[1:]
    assert sorted(ln.split("\t")[3] for ln in kept) == sorted(
        ["c10/CMakeFiles/c10.dir/util/Exception.cpp.o", "lib/libc10.so"]), kept
    assert "c10.dir/util/Exception.cpp.o" in steps[0] and "Linking CXX shared library lib/libc10.so" in steps[1]
    commands = [ln for ln in log.read_text().splitlines() if ln.startswith("$ ")]
    assert not any(" -S " in c for c in commands), "an unchanged configuration must not re-run cmake"
    syms = subprocess.run(["nm", "-D", "-C", str(Path(dirty["path"]) / "prefix/lib/libc10.so")],
                          capture_output=True, text=True).stdout
    assert "c10::orch_probe()" in syms

    # The debugger: `doit vscode` in the checkout writes lldb files whose source maps find
    # c10's sources in the checkout; the preLaunchTask rebuilds exactly this artifact.
    res = doit(world, "vscode", ws, f"source={co}", "recipe=pytorch", "targets=c10")
    assert res.returncode == 0, res.output[-3000:]
    tasks = json.loads((co / ".vscode/tasks.json").read_text())["tasks"]
    [pre] = [t for t in tasks if t["label"] == "orch: build"]
    assert "targets=c10" in pre["args"] and f"source={co}" in pre["args"], pre["args"]
    launch = (co / ".vscode/launch.json").read_text()
    assert "lldb-dap" in launch
    lldb = co / ".orch/bin/lldb"
    out = subprocess.run([str(lldb), "-b", "-S", str(co / ".lldbinit"),
                          "-o", f"target create {co / 'torch/lib/libc10.so'}",
                          "-o", "breakpoint set -n c10::detail::torchCheckFail",
                          "-o", "source list -n c10::detail::torchCheckFail"],
                         capture_output=True, text=True, timeout=300)
    assert "void torchCheckFail(" in out.stdout, out.stdout[-3000:] + out.stderr[-2000:]
    assert "File: /orch/src/pytorch/c10/util/Exception.cpp" in out.stdout
    assert (co / "c10/util/Exception.cpp").is_file()


def test_cuda_on_without_arch_list_stops_before_building(world, tmp_path):
    recipe = world["project"] / "recipes" / "pytorch.toml"
    original = recipe.read_text()
    try:
        recipe.write_text(original.replace('[variants.release]\nbuild_type = "Release"',
                                           '[variants.release]\nbuild_type = "Release"\n'
                                           'env = { USE_CUDA = "1" }'))
        res = doit(world, "build", "variant=release", *C10)
    finally:
        recipe.write_text(original)
    assert res.returncode == 2, res.output
    assert "TORCH_CUDA_ARCH_LIST" in res.output and "Traceback" not in res.output


def test_drifted_system_package_is_an_error_naming_it(world):
    lock_file = world["project"] / "locks" / "pytorch.lock.json"
    original = lock_file.read_text()
    try:
        data = json.loads(original)
        data["entries"]["syspkg:libcpuinfo-dev"]["version"] = "0.0-not-installed"
        lock_file.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        res = doit(world, "build", "variant=release", *C10)
    finally:
        lock_file.write_text(original)
    assert res.returncode != 0 and "libcpuinfo-dev" in res.output and "lock drift" in res.output


def test_unknown_target_is_bad_input(world):
    res = doit(world, "build", "variant=release", "recipe=pytorch", "targets=c10,no_such_target",
               "substitute=0")
    assert res.returncode == 2, res.output[-2000:]
    assert "targets=no_such_target: no such CMake target" in res.output
    assert not any(p.name.startswith("failed-") for p in (world["store"] / "tmp").iterdir())


# The objects that stopped a full build of the pinned tree (kineto headers with USE_KINETO=0,
# pocketfft, flatbuffers 2.0.8 + GCC 12 at -O0, the generated protobuf 3.21 sources with
# CAFFE2_LINK_LOCAL_PROTOBUF on): compiled through the orchestrator's tree.
FORMER_BLOCKERS = (
    "caffe2/CMakeFiles/torch_cpu.dir/__/torch/csrc/profiler/kineto_shim.cpp.o",
    "caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native/mkl/SpectralOps.cpp.o",
    "caffe2/CMakeFiles/torch_cpu.dir/__/torch/csrc/jit/mobile/flatbuffer_loader.cpp.o",
    "caffe2/proto/CMakeFiles/Caffe2_PROTO.dir/torch.pb.cc.o",
)


def test_debug_flags_and_the_former_full_build_blockers(world):
    res = build(world, "variant=debug", targets=",".join(("c10", *FORMER_BLOCKERS)))
    art = Path(res["path"])
    assert_flags(json.loads((art / "meta/compile_commands.json").read_text()), "Debug")
    steps = (art / "meta/ninja_log").read_text().splitlines()
    assert steps[0].startswith("# ninja log")
    built = {ln.split("\t")[3] for ln in steps[1:]}
    assert set(FORMER_BLOCKERS) <= built, sorted(built)[:20]
    assert "lib/libc10.so" in built
    # Not an output of this tree: one line before compiling anything.
    res = doit(world, "build", "variant=debug", "recipe=pytorch", "substitute=0",
               "targets=c10,caffe2/CMakeFiles/no/such.cpp.o")
    assert res.returncode == 2 and "no such build output" in res.output, res.output[-2000:]
