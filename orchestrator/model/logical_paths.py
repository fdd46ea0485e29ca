"""The logical roots debug info names instead of this machine's paths.

Builds map the source dir to `/orch/src/<recipe>` and the build tree to
`/orch/build/<recipe>-<variant>` (`-ffile-prefix-map`); the IDE and debugger maps point
them back at the workspace. Builders and the IDE read both names from here.
"""
from __future__ import annotations

LOGICAL_SRC_ROOT = "/orch/src"
LOGICAL_BUILD_ROOT = "/orch/build"


def logical_source(recipe: str) -> str:
    """Where debug info names a recipe's source: `/orch/src/<recipe>`."""
    return f"{LOGICAL_SRC_ROOT}/{recipe}"


def logical_build(recipe: str, variant: str) -> str:
    """Where debug info names a variant's build tree: `/orch/build/<recipe>-<variant>`."""
    return f"{LOGICAL_BUILD_ROOT}/{recipe}-{variant}"

# Split DWARF: the comp_dir the compile lines give every unit, and the directory beside each
# installed library that holds its units' .dwo files (builders/split_dwarf.py).
DWO_DIR = ".dwo"
