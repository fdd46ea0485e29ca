"""docs/contracts.md stays true to the code: every module, function or class it names (as
`orchestrator.x.y`, `x.y.z` with x a top-level module, or an `orchestrator/...` path) exists."""
from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import orchestrator

REPO = Path(__file__).resolve().parents[1]
CONTRACTS = REPO / "docs" / "contracts.md"
# Dotted names in the text that are manifest/JSON fields, not Python names.
JSON_FIELDS = {"verify.rules", "verify.forced"}


def resolves(ref: str) -> bool:
    """orchestrator.<ref> is a module, or a module's attribute chain."""
    parts = ref.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module("orchestrator." + ".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for name in parts[i:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def test_every_python_name_in_contracts_exists() -> None:
    top = {m.name for m in pkgutil.iter_modules(orchestrator.__path__)}
    text = CONTRACTS.read_text()
    refs = {m[1] for m in re.finditer(r"`(?:orchestrator\.)?([a-z_]+(?:\.[A-Za-z_]+)+)", text)}
    named = {r for r in refs if r.split(".")[0] in top
             and not r.endswith((".py", ".json", ".toml", ".md"))} - JSON_FIELDS  # file names
    assert len(named) > 30, named  # the map and the API sections name many
    missing = sorted(r for r in named if not resolves(r))
    assert not missing, f"docs/contracts.md names what the code no longer has: {missing}"


def test_every_orchestrator_path_in_contracts_exists() -> None:
    paths = set(re.findall(r"(?<![\w./-])orchestrator/[\w/]+(?:\.py)?", CONTRACTS.read_text()))
    assert paths
    missing = sorted(p for p in paths if not (REPO / p).exists())
    assert not missing, f"docs/contracts.md names paths that do not exist: {missing}"


def test_sections_are_grouped_by_package_in_layer_order() -> None:
    """Each `## x/ ...` heading names packages of orchestrator.LAYERS, lowest layer first."""
    layer_of = {name.split(".")[0]: i for i, (_, names, _) in enumerate(orchestrator.LAYERS)
                for name in names if "." not in name}
    headings = re.findall(r"(?m)^## (.+)$", CONTRACTS.read_text())
    ranks = []
    for heading in headings:
        packages = re.findall(r"\b([a-z_]+)/", heading)
        if not packages:
            continue
        unknown = [p for p in packages if p not in layer_of]
        assert not unknown, f"docs/contracts.md heading {heading!r} names no package of LAYERS: {unknown}"
        ranks.append((min(layer_of[p] for p in packages), heading))
    assert len(ranks) >= 8, headings
    assert ranks == sorted(ranks, key=lambda r: r[0]), f"package sections out of layer order: {ranks}"
