"""What a PyTorch source tree is: its build driver and its version, checked to be one the
pytorch builder drives (asked for `source=PATH` before any work, and again by the builder)."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

from orchestrator.errors import UserError

# Major versions of PyTorch source trees the pytorch builder drives (setup.py's CMake defines,
# the layout of torch/csrc and torch/lib): 1.x (from 1.13) and 2.x.
SUPPORTED_MAJORS = (1, 2)
VERSION_RE = re.compile(r"^(\d+)\.(\d+)(\.\d+)?([A-Za-z0-9.+_-]*)$")
SUPPORTED_TEXT = ("the pytorch builder handles PyTorch 1.x and 2.x source trees "
                  "(version.txt and setup.py, or a scikit-build-core pyproject.toml, at the root)")


def detect_driver(src: Path) -> str:
    """'setuptools' (setup.py → cmake) or 'scikit-build-core' (pyproject build backend)."""
    pyproject = src / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text())
        except tomllib.TOMLDecodeError as e:
            raise UserError(f"{pyproject}: malformed TOML ({e}); fix the checkout") from None
        backend = str(data.get("build-system", {}).get("build-backend", ""))
        if backend.startswith("scikit_build_core"):
            return "scikit-build-core"
    if (src / "setup.py").is_file():
        return "setuptools"
    raise UserError(f"{src}: neither setup.py nor a scikit-build-core pyproject.toml; "
                    "is this a PyTorch checkout?")


def tree_version(src: Path, where: str) -> str:
    """The version a PyTorch tree's version.txt says, checked to be one this builder drives;
    anything else is one line naming what was found and what is supported."""
    vfile = src / "version.txt"
    missing = [] if vfile.is_file() else ["version.txt"]
    try:
        detect_driver(src)
    except UserError:
        missing.append("setup.py")
    if missing:
        raise UserError(f"{where}: {src} has no {' and no '.join(missing)}; {SUPPORTED_TEXT}")
    text = vfile.read_text(errors="replace").strip()
    m = VERSION_RE.match(text)
    if not m:
        raise UserError(f"{where}: {vfile} says {text[:40]!r}, not a version; {SUPPORTED_TEXT}")
    if int(m[1]) not in SUPPORTED_MAJORS:
        raise UserError(f"{where}: {src} is PyTorch {text} (version.txt); {SUPPORTED_TEXT}")
    return text
