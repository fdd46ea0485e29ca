"""docs/recipes.md (issue 33): every recipe key of the models is documented (its meaning and
example in model/recipe_notes.py), the generated table in the doc is current, and the worked
example is a valid recipe."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

from orchestrator.model.recipe import Recipe
from orchestrator.model.recipe_notes import NOTES
from orchestrator.model.recipe_reference import BEGIN, END, keys, render, undocumented

DOC = Path(__file__).resolve().parents[1] / "docs" / "recipes.md"


def test_every_key_of_the_models_has_a_note_and_every_note_a_key():
    assert undocumented() == []
    assert sorted(set(NOTES) - {k.name for k in keys()}) == []
    for name in ("build.env", "verify.opt_level", "verify.allowed_system_libs", "verify.ignore"):
        assert name in NOTES  # the keys users could only find in code before


def test_the_doc_holds_the_generated_table():
    text = DOC.read_text()
    generated = text[text.index(BEGIN):text.index(END) + len(END)]
    assert generated == render(), "docs/recipes.md is stale: regenerate its key table"


def test_the_worked_example_is_a_valid_recipe():
    block = re.search(r"```toml\n(.*?)```", DOC.read_text(), re.S)
    assert block
    recipe = Recipe.model_validate({"name": "myext", **tomllib.loads(block[1])})
    assert recipe.build.env == {"WITH_SYMBOLS": "1"}
    assert recipe.verify.opt_level["relwithdebinfo"] == "3"
    assert recipe.runtime.requires == ["numpy>=1.26"]
