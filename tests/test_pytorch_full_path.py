"""The pytorch builder's full-build path (targets unset) end to end on a PyTorch-shaped
miniature (recipes/pytorch/minitorch): cmake --install, torch._C from torch/csrc/stub.c
against libtorch_python, the torch package carried, and `import torch` in a checkout
workspace following switch / rollback. Real cmake, ninja, gcc and Python; ~1 minute.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest
from conftest import REPO, copy_project, run_doit

MINI = REPO / "recipes" / "pytorch" / "minitorch"
PROBE = ("import torch, functorch, torchgen; print(torch.__config__.show().strip()); "
         "print(functorch._C.origin); print(torch._C._GLIBCXX_USE_CXX11_ABI)")


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    root = tmp_path_factory.mktemp("minitorch")
    archives = root / "archives"
    archives.mkdir()
    tarball = archives / "minitorch-0.1.0.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(MINI, arcname="minitorch-0.1.0",
                filter=lambda ti: None if "__pycache__" in ti.name else ti)
    sha = hashlib.sha256(tarball.read_bytes()).hexdigest()
    project = copy_project(root / "project")
    (project / "recipes" / "minitorch.toml").write_text(f"""
lock = "pytorch"
[source]
kind = "archive"
file = "minitorch-0.1.0.tar.gz"
sha256 = "{sha}"
[build]
system = "pytorch"
[build.pytorch]
version = "0.1.0"
[variants.relwithdebinfo]
build_type = "RelWithDebInfo"
# What the pinned lldb-14 needs to read GCC 12's debug info (verify checks it).
cflags = ["-gdwarf-4", "-fno-reorder-blocks-and-partition"]
[variants.release]
build_type = "Release"
""")
    checkout = root / "checkout"
    checkout.mkdir()
    subprocess.run(["tar", "-xzf", str(tarball), "-C", str(checkout)], check=True)
    return {"project": project, "store": root / "store", "env": {"ORCH_ARCHIVES": str(archives)},
            "checkout": checkout / "minitorch-0.1.0"}


def doit(mini, *args: str):
    res = run_doit(mini["project"], *args, "recipe=minitorch", f"store={mini['store']}",
                   "substitute=0", env=mini["env"])
    assert res.returncode == 0, res.output[-3000:]
    return res


def run_python(ws: Path, code: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    py = ws / ".orch" / "toolchain" / "venv" / "bin" / "python"
    out = subprocess.run([str(py), "-c", code], cwd=cwd, capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", **(env or {})})
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_full_build_import_torch_follows_switch_and_rollback(mini):
    builds = {}
    for variant in ("relwithdebinfo", "release"):
        res = doit(mini, "build", f"variant={variant}", "format=json")
        builds[variant] = Path(json.loads(res.stdout.strip().splitlines()[-1])["path"])
    art = builds["relwithdebinfo"]
    py = art / "prefix" / "python" / "torch"
    [ext] = list(py.glob("_C.cpython-*.so"))
    assert (py / "__init__.py").is_file() and (py / "lib").is_symlink()
    assert (art / "prefix/lib/libtorch_python.so").is_file()
    assert (art / "prefix/include/c10/build_info.h").is_file()
    info = json.loads((art / "meta/pytorch.json").read_text())
    # torchgen and functorch beside torch, as a wheel has them (torch 2.x imports torchgen).
    [fext] = list((art / "prefix/python/functorch").glob("_C.cpython-*.so"))
    assert info["extensions"] == [f"python/torch/{ext.name}", f"python/functorch/{fext.name}"]
    assert info["driver"] == "setuptools"
    gen = art / "prefix/python/torchgen"
    assert (gen / "model.py").is_file() and (gen / "packaged/ATen/native/native_functions.yaml").is_file()
    assert (gen / "packaged/autograd/derivatives.yaml").is_file()
    assert (gen / "packaged/autograd/templates/VariableType.cpp").is_file()
    assert (gen / "packaged/ATen/templates/Functions.h").is_file()
    links = json.loads((art / "meta/workspace-links.json").read_text())["links"]
    assert links[f"torch/{ext.name}"] == f"prefix/python/torch/{ext.name}"
    assert links[f"functorch/{fext.name}"] == f"prefix/python/functorch/{fext.name}"
    assert links["torch/lib/libc10.so"] == "prefix/lib/libc10.so"
    assert json.loads((art / "meta/verify.json").read_text())["ok"]

    ws = mini["checkout"]
    doit(mini, "switch", "variant=relwithdebinfo", f"workspace={ws}")
    out = run_python(ws, PROBE, cwd=ws)
    assert "BUILD_TYPE=RelWithDebInfo" in out and out.split()[-1] in ("0", "1")
    assert "minitorch functorch.so" in out

    doit(mini, "switch", "variant=release", f"workspace={ws}")
    assert "BUILD_TYPE=Release" in run_python(ws, PROBE, cwd=ws)
    # The same through env.sh's PYTHONPATH (the artifact's own torch package), from elsewhere.
    env_py = str(ws / ".orch" / "profile" / "prefix" / "python")
    assert "BUILD_TYPE=Release" in run_python(ws, PROBE, cwd=Path("/"), env={"PYTHONPATH": env_py})

    res = run_doit(mini["project"], "rollback", f"workspace={ws}", f"store={mini['store']}")
    assert res.returncode == 0, res.output
    assert "BUILD_TYPE=RelWithDebInfo" in run_python(ws, PROBE, cwd=ws)
    assert os.readlink(ws / "torch" / ext.name).startswith("../.orch/profile/")
