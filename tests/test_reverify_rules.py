"""reverify.recorded_rules reads a manifest's `verify.rules` without the Manifest model (the
no-op build's and the switch's path): the same answer as the model, and None, never a
traceback, for a manifest that lacks it or is not what a commit writes."""
from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.model.manifest import MANIFEST_NAME, Manifest
from orchestrator.realise.reverify import recorded_rules


def manifest(tmp_path: Path, text: str) -> Path:
    art = tmp_path / "art"
    art.mkdir(exist_ok=True)
    (art / MANIFEST_NAME).write_text(text)
    return art


def test_the_same_answer_as_the_model(tmp_path: Path) -> None:
    m = Manifest(id="a" * 40, recipe="demo", variant="release", derivation={}, files=[],
                 verify={"ok": True, "rules": "0123456789abcdef"})
    art = manifest(tmp_path, m.model_dump_json())
    assert recorded_rules(art) == "0123456789abcdef"
    assert recorded_rules(art) == (model_manifest(art).verify or {}).get("rules")


def model_manifest(art: Path) -> Manifest:
    return Manifest.model_validate_json((art / MANIFEST_NAME).read_text())


@pytest.mark.parametrize("text", [
    "{}", '{"verify": null}', '{"verify": {"ok": true}}', '{"verify": {"rules": 7}}',
    '{"verify": "rules"}', "[]", '"x"', "null", "{not json", "", '{"verify": {"rules": ["a"]}}',
])
def test_anything_else_is_none(tmp_path: Path, text: str) -> None:
    assert recorded_rules(manifest(tmp_path, text)) is None
