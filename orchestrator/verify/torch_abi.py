"""The locked torch's C++ ABI flag: asked once from the toolchain's interpreter, then recorded.

`probe_torch(python)` imports torch in the toolchain venv and reads
`torch._C._GLIBCXX_USE_CXX11_ABI`; the toolchain records it in toolchain.json under "torch"
when it is materialized, and `torch_facts` reads it from there.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.errors import UserError
from orchestrator.verify.config import TorchFacts

if TYPE_CHECKING:
    from orchestrator.toolchain import Toolchain

_PROBE = ("import json, torch; print(json.dumps({'version': torch.__version__.split('+')[0], "
          "'cxx11_abi': bool(torch._C._GLIBCXX_USE_CXX11_ABI)}))")


def probe_torch(python: Path) -> dict[str, object] | None:
    """{'version', 'cxx11_abi'} of the torch importable by `python`; None if it has none."""
    res = subprocess.run([str(python), "-c", _PROBE], capture_output=True, text=True)
    if res.returncode != 0:
        if "No module named 'torch'" in res.stderr:
            return None
        last = (res.stderr.strip().splitlines() or ["import failed"])[-1]
        raise UserError(f"importing torch with {python} failed: {last}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def torch_facts(toolchain: "Toolchain") -> TorchFacts | None:
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
