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


SKBUILD_BACKEND = "scikit_build_core.build"
SETUPTOOLS_BACKENDS = ("setuptools.build_meta", "setuptools.build_meta:__legacy__")


def read_pyproject(src: Path) -> dict:
    """The tree's pyproject.toml ({} without one); malformed TOML is one line."""
    pyproject = src / "pyproject.toml"
    if not pyproject.is_file():
        return {}
    try:
        return tomllib.loads(pyproject.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{pyproject}: malformed TOML ({e}); fix the checkout") from None


def detect_driver(src: Path) -> str:
    """The tree's front-end, as pip would pick it: 'scikit-build-core' (build-backend
    scikit_build_core.build: [tool.scikit-build] configures CMake, PyTorch 2.14 on) or
    'setuptools' (a setuptools backend, or no [build-system] table, and setup.py drives
    CMake). Any other backend is one line naming it."""
    data = read_pyproject(src)
    system = data.get("build-system", {})
    backend = str(system.get("build-backend", "")) if isinstance(system, dict) else ""
    if backend == SKBUILD_BACKEND:
        return "scikit-build-core"
    if backend and backend not in SETUPTOOLS_BACKENDS:
        raise UserError(f"{src / 'pyproject.toml'}: build-backend {backend!r}; the pytorch builder "
                        f"reads {SKBUILD_BACKEND} ([tool.scikit-build]) or setuptools (setup.py) "
                        "trees; build this one with its own front-end")
    if (src / "setup.py").is_file():
        return "setuptools"
    if backend:
        raise UserError(f"{src / 'pyproject.toml'}: build-backend {backend!r} but {src} has no "
                        "setup.py; is this a PyTorch checkout?")
    raise UserError(f"{src}: neither setup.py nor a scikit-build-core pyproject.toml; "
                    "is this a PyTorch checkout?")


def tree_version(src: Path, where: str) -> str:
    """The version a PyTorch tree's version.txt says, checked to be one this builder drives;
    anything else is one line naming what was found and what is supported."""
    vfile = src / "version.txt"
    missing = [] if vfile.is_file() else ["version.txt"]
    if not (src / "setup.py").is_file() and not (src / "pyproject.toml").is_file():
        missing.append("setup.py")
    if missing:
        raise UserError(f"{where}: {src} has no {' and no '.join(missing)}; {SUPPORTED_TEXT}")
    text = vfile.read_text(errors="replace").strip()
    m = VERSION_RE.match(text)
    if not m:
        raise UserError(f"{where}: {vfile} says {text[:40]!r}, not a version; {SUPPORTED_TEXT}")
    if int(m[1]) not in SUPPORTED_MAJORS:
        raise UserError(f"{where}: {src} is PyTorch {text} (version.txt); {SUPPORTED_TEXT}")
    detect_driver(src)  # an unknown front-end is one line naming it
    return text
