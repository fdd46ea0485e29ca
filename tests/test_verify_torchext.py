"""`doit verify` end to end on real builds: the torchext libtorch extension (against the locked
torch 2.13.0 wheel) and the cudademo CUDA library (nvcc compile + link, no GPU)."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import DoitResult, copy_project, make_store, run_doit


class Env:
    """One project copy + store for this module; builds are shared between tests."""

    def __init__(self, root: Path, *toolchains: Path) -> None:
        self.project = copy_project(root / "project")
        self.store = make_store(root / "store", *toolchains)
        self.workspace = root / "ws"
        self.workspace.mkdir()

    def doit(self, *args: str) -> DoitResult:
        extra = [f"store={self.store}"]
        if args[0] in ("switch", "rollback", "status", "verify", "vscode", "gc"):
            extra.append(f"workspace={self.workspace}")  # the verbs that use one
        if args[0] in ("build", "switch"):
            extra.append("substitute=0")
        return run_doit(self.project, *args, *extra)

    def build(self, recipe: str, variant: str, *more: str) -> DoitResult:
        return self.doit("build", f"recipe={recipe}", f"variant={variant}", *more)

    def artifact(self, recipe: str, variant: str) -> Path | None:
        found = sorted((self.store / "store").glob(f"*-{recipe}-{variant}"))
        return found[0] if found else None

    def failed(self, recipe: str, variant: str) -> Path:
        [d] = sorted((self.store / "tmp").glob(f"failed-*-{recipe}-{variant}"))
        return d


@pytest.fixture(scope="module")
def env(tmp_path_factory, session_toolchain, session_cuda_toolchain) -> Env:
    return Env(tmp_path_factory.mktemp("verify-e2e"), session_toolchain, session_cuda_toolchain)


@pytest.fixture(scope="module")
def torchext(env) -> Path:
    """The correct build, shared by every test that needs it."""
    res = env.build("torchext", "relwithdebinfo")
    assert res.returncode == 0, res.output
    path = env.artifact("torchext", "relwithdebinfo")
    assert path is not None
    return path


def report_of(d: Path) -> dict:
    return json.loads((d / "meta" / "verify.json").read_text())


def fails(report: dict, check: str) -> list[dict]:
    return [f for f in report["findings"] if f["check"] == check and f["severity"] == "fail"]


def test_correct_build_verifies_clean_and_its_op_runs_after_switch(env, torchext):
    stored = report_of(torchext)
    assert stored["ok"] and set(stored["checks"].values()) == {"pass"}, stored["findings"]
    manifest = json.loads((torchext / "manifest.json").read_text())
    assert manifest["verify"]["ok"] is True and manifest["verify"]["failures"] == 0
    res = env.doit("verify", "recipe=torchext", "format=json")
    assert res.returncode == 0, res.output
    live = json.loads(res.stdout.strip().splitlines()[-1])
    facts = live["files"]["prefix/lib/libtorchext.so"]
    assert facts["cxx11_abi"] == "1"
    assert {"libc10.so", "libtorch_cpu.so"} <= set(facts["needed"])
    # The locked torch's runtime flag, recorded once per toolchain or probed.
    sw = env.doit("switch", "recipe=torchext")
    assert sw.returncode == 0, sw.output
    code = ("import torch, torchext; "
            "print(torch.ops.torchext.scaled_add(torch.ones(3), torch.arange(3.0), 2.0).tolist())")
    out = subprocess.run(["bash", "-c", f". '{env.workspace}/.orch/env.sh' && python -c '{code}'"],
                         capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[1.0, 3.0, 5.0]"


def test_relwithdebinfo_has_dwarf_release_has_none(env, torchext):
    rwdi = report_of(torchext)["files"]["prefix/lib/libtorchext.so"]
    assert rwdi["debug_info"] is True
    assert any(" -g" in p and "-O2" in p for p in rwdi["producers"]), rwdi["producers"]
    res = env.build("torchext", "release")
    assert res.returncode == 0, res.output
    rel = report_of(env.artifact("torchext", "release"))
    assert rel["ok"] and rel["files"]["prefix/lib/libtorchext.so"]["debug_info"] is False


def test_old_cxx_abi_fails_naming_a_c10_symbol_and_the_cause(env, torchext):
    res = env.build("torchext", "abi0")
    assert res.returncode == 1, res.output
    assert env.artifact("torchext", "abi0") is None
    kept = env.failed("torchext", "abi0")
    assert f"the staged output is kept in {kept}" in res.output.replace("\n", "")
    report = report_of(kept)
    [abi] = fails(report, "cxx_abi")
    assert abi["cause"].startswith(
        "libtorchext.so was built with _GLIBCXX_USE_CXX11_ABI=0 but torch 2.13.0 (libc10.so) uses 1")
    assert "c10::" in abi["cause"]
    assert any(f["detail"]["demangled"].startswith("c10::detail::torchCheckFail(")
               for f in fails(report, "symbols"))
    # `doit verify` needs a committed artifact; commit_failed=1 commits with the failure recorded.
    forced = env.build("torchext", "abi0", "commit_failed=1")
    assert forced.returncode == 0, forced.output
    committed = env.artifact("torchext", "abi0")
    manifest = json.loads((committed / "manifest.json").read_text())
    assert manifest["verify"]["ok"] is False and manifest["verify"]["forced"] is True
    again = env.doit("verify", "recipe=torchext", "variant=abi0")
    assert again.returncode == 1
    assert "_GLIBCXX_USE_CXX11_ABI=0" in again.output


def test_missing_needed_libpython_and_build_runpath_are_named(env):
    res = env.build("torchext", "broken")
    assert res.returncode == 1, res.output
    report = report_of(env.failed("torchext", "broken"))
    missing = [f for f in fails(report, "resolution") if f["detail"].get("soname") == "libghost.so"]
    assert missing and missing[0]["file"] == "prefix/lib/libneeds_ghost.so"
    assert "libghost.so (needed by prefix/lib/libneeds_ghost.so) not found; searched:" in missing[0]["cause"]
    [py] = fails(report, "python")
    assert py["file"].endswith("pylinked.cpython-311-x86_64-linux-gnu.so")
    assert "extension module links libpython3.11" in py["cause"] and "forbid" in py["cause"]
    [rp] = fails(report, "portability")
    assert rp["file"] == "prefix/lib/libbuild_runpath.so"
    assert "RUNPATH entry" in rp["cause"] and "points into the build directory" in rp["cause"]
    assert str(env.store / "build") in rp["cause"]


def test_cuda_fatbin_architectures_against_the_variant(env):
    ok = env.build("cudademo", "relwithdebinfo")
    assert ok.returncode == 0, ok.output
    facts = report_of(env.artifact("cudademo", "relwithdebinfo"))["files"]["prefix/lib/libcudademo.so"]
    assert facts["cuda"] == ["compute_90", "sm_90"]
    bad = env.build("cudademo", "wrongarch")
    assert bad.returncode == 1
    [f] = fails(report_of(env.failed("cudademo", "wrongarch")), "cuda")
    assert f["detail"] == {"embedded": ["sm_80"], "expected": ["compute_90", "sm_90"]}
    assert "variant wrongarch asks for CUDA architectures '90'" in f["cause"]


def test_bad_input_is_one_line_exit_2(env):
    res = env.doit("verify", "id=0000000")
    assert res.returncode == 2
    assert "id=0000000: no artifact" in res.output
    res = env.doit("verify", "recipe=cudademo", "variant=release")
    assert res.returncode == 2 and "is not in the store; run `doit build recipe=cudademo variant=release`" in res.output
    assert "Traceback" not in res.output
