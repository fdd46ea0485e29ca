"""build.system → its builder."""
from __future__ import annotations

from orchestrator.builders.cmake import CMakeBuilder
from orchestrator.builders.context import Builder
from orchestrator.builders.pep517 import Pep517Builder
from orchestrator.builders.pytorch import PyTorchBuilder
from orchestrator.builders.setuptools import SetuptoolsBuilder
from orchestrator.errors import UserError

BUILDERS: dict[str, type[Builder]] = {"cmake": CMakeBuilder, "pytorch": PyTorchBuilder,
                                      "setuptools": SetuptoolsBuilder, "pep517": Pep517Builder}


def get_builder(system: str) -> Builder:
    builder = BUILDERS.get(system)
    if builder is None:
        raise UserError(f"build system {system!r} has no builder; use cmake, setuptools, pep517 "
                        "or pytorch")
    return builder()
