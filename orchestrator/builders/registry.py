"""build.system → its builder, imported on first use: a build pays only for its own builder
(importing all four cost 0.15-0.2 s of every incremental build)."""
from __future__ import annotations

import importlib

from orchestrator.builders.context import Builder
from orchestrator.errors import UserError

BUILDERS: dict[str, tuple[str, str]] = {  # system → (module, class)
    "cmake": ("orchestrator.builders.cmake", "CMakeBuilder"),
    "pytorch": ("orchestrator.builders.pytorch", "PyTorchBuilder"),
    "setuptools": ("orchestrator.builders.setuptools", "SetuptoolsBuilder"),
    "pep517": ("orchestrator.builders.pep517", "Pep517Builder"),
}


def get_builder(system: str) -> Builder:
    where = BUILDERS.get(system)
    if where is None:
        raise UserError(f"build system {system!r} has no builder; use cmake, setuptools, pep517 "
                        "or pytorch")
    module, name = where
    builder: type[Builder] = getattr(importlib.import_module(module), name)
    return builder()
