"""The locked torch's C++ ABI flag: asked once from the toolchain's interpreter, then recorded.

`toolchain.probe_torch(python)` imports torch in the toolchain venv and reads
`torch._C._GLIBCXX_USE_CXX11_ABI`; the toolchain records it in toolchain.json under "torch"
when it is materialized, and `torch_facts` reads it from there.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.toolchain.materialize import probe_torch
from orchestrator.verify.inputs import TorchFacts

if TYPE_CHECKING:
    from orchestrator.toolchain.materialize import Toolchain


def torch_facts(toolchain: Toolchain) -> TorchFacts | None:
    """The locked torch's facts: recorded in toolchain.json, else probed now (not recorded)."""
    lib_dir = toolchain.site_packages() / "torch" / "lib"
    try:
        recorded = toolchain.info().get("torch")
    except (OSError, ValueError):
        recorded = None
    if recorded is None:
        recorded = probe_torch(toolchain.python)
    if recorded is None:
        return None
    return TorchFacts(version=str(recorded["version"]), lib_dir=lib_dir if lib_dir.is_dir() else None,
                      cxx11_abi=bool(recorded["cxx11_abi"]))
