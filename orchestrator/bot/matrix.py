"""nightly.toml read and checked completely up front; the matrix as a list of cells.

Every problem (schema, a recipe that does not exist or does not load, a variant the recipe
lacks, `track` on a recipe without a git source, a cell listed twice) is found before any
cell runs and reported one line each (UserError, exit 2).
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestrator.config.settings import Settings
from orchestrator.errors import UserError
from orchestrator.model.nightly import MatrixEntry, NightlyConfig
from orchestrator.model.recipe import load_recipe
from orchestrator.model.user_file import read_toml

RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class Cell:
    """One (recipe, variant) of the matrix, with what a CI engine needs to place it."""
    recipe: str
    variant: str
    requires_gpu: bool
    track: str | None
    timeout_s: float

    @property
    def name(self) -> str:
        return f"{self.recipe}/{self.variant}"

    @property
    def key(self) -> str:
        """File-name form of the cell (the result file, the workspace, the log)."""
        return f"{self.recipe}@{self.variant}"

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "cell": self.name, "key": self.key,
                "runs_on": "gpu" if self.requires_gpu else "cpu"}


def cell_path(reports: Path, run: str, cell: Cell) -> Path:
    """Where a cell's result for a run lives (the merge reads it from there)."""
    return reports / "runs" / run / "cells" / f"{cell.key}.json"


def config_path(settings: Settings) -> Path:
    return Path(settings.vars.get("config") or settings.repo_root / "nightly.toml")


def _schema_problems(path: Path, err: ValidationError) -> list[str]:
    out = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"] if not str(p).startswith("function-")) or "(top)"
        msg = e["msg"].removeprefix("Value error, ")
        out.append(f"{path.name}: {loc}: {msg}")
    return out


def _entry_problems(settings: Settings, i: int, entry: MatrixEntry, where: str) -> list[str]:
    at = f"{where}: matrix.{i}"
    try:
        recipe = load_recipe(settings.recipes_dir, entry.recipe)
    except UserError as e:
        return [f"{at}.recipe: {e}"]
    out = []
    for v in entry.variants:
        if v not in recipe.variants:
            out.append(f"{at}.variants: recipe {entry.recipe!r} has no variant {v!r} "
                       f"(it has: {', '.join(sorted(recipe.variants))})")
    if entry.track is not None and recipe.source.kind != "git":
        out.append(f"{at}.track: recipe {entry.recipe!r} has a {recipe.source.kind!r} source; "
                   "track = BRANCH needs source.kind = \"git\"")
    return out


def load_matrix(settings: Settings) -> tuple[NightlyConfig, list[Cell]]:
    """Read nightly.toml and check everything; UserError listing every problem."""
    path = config_path(settings)
    if not path.is_file():
        raise UserError(f"no bot config {path}; create it or pass config=PATH")
    data = read_toml(path, "fix the bot config")
    try:
        config = NightlyConfig.model_validate(data)
    except ValidationError as e:
        raise UserError(_problems_message(path, _schema_problems(path, e))) from None
    problems: list[str] = []
    cells: list[Cell] = []
    seen: set[str] = set()
    for i, entry in enumerate(config.matrix):
        problems += _entry_problems(settings, i, entry, path.name)
        for v in entry.variants:
            cell = Cell(entry.recipe, v, entry.requires_gpu, entry.track, entry.timeout_s)
            if cell.name in seen:
                problems.append(f"{path.name}: matrix.{i}: cell {cell.name} is listed twice")
            seen.add(cell.name)
            cells.append(cell)
    if problems:
        raise UserError(_problems_message(path, problems))
    return config, cells


def _problems_message(path: Path, problems: list[str]) -> str:
    if len(problems) == 1:
        return f"{problems[0]}; fix the bot config"
    return (f"{path.name}: {len(problems)} problems; fix the bot config\n"
            + "\n".join(f"  {p}" for p in problems))


def find_cell(cells: list[Cell], name: str, where: str) -> Cell:
    for c in cells:
        if c.name == name:
            return c
    raise UserError(f"cell={name!r} is not in {where}; use one of: "
                    f"{', '.join(c.name for c in cells)} (`doit nightly matrix`)")


def check_run_id(run: str) -> str:
    if not RUN_ID_RE.match(run):
        raise UserError(f"run={run[:80]!r}: use 1-64 letters, digits, '.', '_', '-' "
                        "(the same run= for every cell of a run)")
    return run


def entry_of(config: NightlyConfig, cell: Cell) -> MatrixEntry:
    return next(e for e in config.matrix if e.recipe == cell.recipe and cell.variant in e.variants)
