"""Workspace links a PyTorch artifact asks for (torch/lib/*.so, torch/_C*.so) through the
profile: made on switch, followed by rollback, never over a real file, pruned when gone."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from orchestrator.errors import UserError
from orchestrator.store.artifacts import Store
from orchestrator.workspace.profiles import Workspace

OUTPUTS = {"lib": ["lib"], "bin": ["bin"], "python": ["python"]}


def fake_artifact(root: Path, name: str, libs: list[str]) -> Path:
    """A store-shaped directory (what the builder stages), written by hand for the links only."""
    art = root / "store" / name
    (art / "prefix/lib").mkdir(parents=True)
    (art / "prefix/python/torch").mkdir(parents=True)
    (art / "meta").mkdir()
    links = {}
    for lib in libs:
        (art / "prefix/lib" / lib).write_text(f"{name}:{lib}\n")
        links[f"torch/lib/{lib}"] = f"prefix/lib/{lib}"
    (art / "prefix/python/torch/_C.so").write_text(f"{name}:_C\n")
    links["torch/_C.so"] = "prefix/python/torch/_C.so"
    (art / "meta/workspace-links.json").write_text(json.dumps({"links": links}))
    (art / "meta/compile_commands.json").write_text("[]")
    (art / "manifest.json").write_text("{}")  # a committed entry has one (switch checks it)
    return art


@pytest.fixture
def setup(tmp_path):
    store = Store(tmp_path / "s").ensure()
    ws_root = tmp_path / "pytorch"
    (ws_root / "torch/lib/libshm").mkdir(parents=True)  # tracked sources live in torch/lib
    (ws_root / "torch/lib/libshm/core.cpp").write_text("// libshm\n")
    a = fake_artifact(tmp_path, "a-pytorch-relwithdebinfo", ["libc10.so", "libtorch_cpu.so"])
    b = fake_artifact(tmp_path, "b-pytorch-release", ["libc10.so"])
    return store, Workspace(ws_root), a, b


def test_links_follow_switch_and_rollback(setup):
    store, ws, a, b = setup
    ws.switch(a, store, None, OUTPUTS)
    lib = ws.root / "torch/lib/libc10.so"
    assert lib.is_symlink() and lib.read_text() == "a-pytorch-relwithdebinfo:libc10.so\n"
    assert (ws.root / "torch/_C.so").read_text() == "a-pytorch-relwithdebinfo:_C\n"
    assert (ws.root / "torch/lib/libshm/core.cpp").is_file()
    ws.switch(b, store, None, OUTPUTS)
    assert lib.read_text() == "b-pytorch-release:libc10.so\n"
    assert not os.path.lexists(ws.root / "torch/lib/libtorch_cpu.so"), "b has no libtorch_cpu"
    ws.rollback()
    assert lib.read_text() == "a-pytorch-relwithdebinfo:libc10.so\n"
    assert (ws.root / "torch/lib/libtorch_cpu.so").read_text().startswith("a-pytorch")
    assert ".orch/profile/" in os.readlink(lib)


def test_a_real_file_is_never_replaced(setup):
    store, ws, a, _ = setup
    (ws.root / "torch/lib/libc10.so").write_text("built by setup.py develop\n")
    with pytest.raises(UserError, match=r"torch/lib/libc10.so is a real file"):
        ws.switch(a, store, None, OUTPUTS)
    assert (ws.root / "torch/lib/libc10.so").read_text() == "built by setup.py develop\n"
    assert not os.path.lexists(ws.root / "torch/_C.so"), "nothing linked before refusing"


def test_no_links_where_the_workspace_is_not_a_checkout(tmp_path, setup):
    store, _, a, _ = setup
    other = Workspace(tmp_path / "elsewhere")
    other.root.mkdir()
    other.switch(a, store, None, OUTPUTS)
    assert not (other.root / "torch").exists()
