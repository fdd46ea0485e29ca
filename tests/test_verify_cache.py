"""What makes a repeated verify cheap, and what keeps it honest: a process that only verifies
imports no pydantic or pyelftools, and the engine's default rules are the recipe model's."""
from __future__ import annotations

import subprocess
import sys

from orchestrator.model.verify_rules import VerifyRules
from orchestrator.verify.inputs import DefaultRules, rules_data


def test_default_rules_are_the_recipe_models_defaults() -> None:
    assert rules_data(DefaultRules()) == VerifyRules().model_dump(mode="json")
    assert rules_data(VerifyRules(host="torch"))["host"] == "torch"


def test_verify_engine_imports_no_pydantic_and_no_pyelftools() -> None:
    code = ("import sys; from orchestrator.verify.inputs import VerifyConfig; "
            "from orchestrator.verify.engine import verify_tree; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'elftools')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
