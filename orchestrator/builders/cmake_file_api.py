"""CMake's file API: the codemodel query a builder writes before configure, and a typed
reader of the reply (only the parts the builders use: targets, their type and directory).

https://cmake.org/cmake/help/latest/manual/cmake-file-api.7.html
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator.errors import UserError

API_DIR = Path(".cmake/api/v1")
CODEMODEL_QUERY = API_DIR / "query" / "codemodel-v2"
REPLY_DIR = API_DIR / "reply"


class _Reply(BaseModel):
    model_config = ConfigDict(populate_by_name=True)  # unknown keys ignored: CMake adds some


class ReplyObject(_Reply):
    kind: str
    json_file: str = Field(alias="jsonFile")


class ReplyIndex(_Reply):
    objects: list[ReplyObject]


class TargetRef(_Reply):
    name: str
    json_file: str = Field(alias="jsonFile")


class Configuration(_Reply):
    name: str = ""
    targets: list[TargetRef] = []


class CodeModel(_Reply):
    configurations: list[Configuration]


class TargetPaths(_Reply):
    build: str    # the build-tree directory defining the target, relative to the tree
    source: str = ""


class Target(_Reply):
    name: str
    type: str = ""  # EXECUTABLE, SHARED_LIBRARY, ..., UTILITY (a custom target)
    paths: TargetPaths


M = TypeVar("M", bound=BaseModel)


def write_query(build_dir: Path) -> None:
    """Ask the next configure for the codemodel (targets → directories)."""
    query = build_dir / CODEMODEL_QUERY
    query.parent.mkdir(parents=True, exist_ok=True)
    query.touch()


class FileApiReply:
    """The newest reply in a build tree; bad input (exit 2) when there is none."""

    def __init__(self, build_dir: Path) -> None:
        self.build_dir = build_dir
        self.dir = build_dir / REPLY_DIR
        index = sorted(self.dir.glob("index-*.json"))
        if not index:
            raise UserError(f"{build_dir}: CMake file-API reply missing; delete the build tree "
                            "and rebuild")
        idx = self._read(ReplyIndex, index[-1].name)
        codemodel = next((o for o in idx.objects if o.kind == "codemodel"), None)
        if codemodel is None:
            raise UserError(f"{build_dir}: CMake file-API reply has no codemodel; delete the "
                            "build tree and rebuild")
        self.codemodel = self._read(CodeModel, codemodel.json_file)

    def _read(self, model: type[M], name: str) -> M:
        try:
            return model.model_validate(json.loads((self.dir / name).read_text()))
        except (OSError, ValueError, ValidationError) as e:
            raise UserError(f"{self.build_dir}: CMake file-API reply {name} unreadable "
                            f"({str(e).splitlines()[0]}); delete the build tree and rebuild") from None

    def targets(self) -> dict[str, TargetRef]:
        """The first configuration's targets by name (a single-config generator: Ninja)."""
        return {t.name: t for t in self.codemodel.configurations[0].targets}

    def target(self, ref: TargetRef) -> Target:
        return self._read(Target, ref.json_file)
