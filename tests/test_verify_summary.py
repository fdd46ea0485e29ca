"""verify's report for people (issue 33): a summary by default (each check's counts, the first
findings, how many more and where they all are), and `[verify] ignore` setting aside the
findings of named files with a stated reason, shown in the report. On real gcc-built
libraries: a library and twelve stray copies of a user of it installed without RUNPATH, as a
third-party project's own install rules leave them."""
from __future__ import annotations

import dataclasses

import pytest
from pydantic import ValidationError
from test_verify_elf import _cfg, cc

from orchestrator.model.recipe import Recipe
from orchestrator.model.verify_rules import IgnoreRule, VerifyRules
from orchestrator.verify.engine import verify_tree
from orchestrator.verify.report import FIRST_FINDINGS, VerifyReport

COPIES = 12


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    art = tmp_path_factory.mktemp("summary") / "art"
    cc(art / "lib" / "libbase.so", "int base(void){return 1;}", "-shared", "-Wl,-soname,libbase.so")
    for i in range(COPIES):  # each needs libbase.so, with no RUNPATH to find it
        cc(art / "lib" / "copies" / f"libuser{i}.so", f"int base(void); int u{i}(void){{return base();}}",
           "-shared", f"-L{art / 'lib'}", "-lbase")
    return art


def test_the_report_is_a_summary_with_where_the_rest_is(prefix):
    report = verify_tree(_cfg(prefix))
    fails = [f for f in report.failures() if f.check == "resolution"]
    assert len(fails) == COPIES and not report.ok
    text = report.render(width=200, full_report="`doit verify recipe=x format=json`")
    shown = [ln for ln in text.splitlines() if "libuser" in ln]
    assert len(shown) == FIRST_FINDINGS
    assert f"… and {len(report.findings) - FIRST_FINDINGS} more finding(s) of " \
           f"{len(report.findings)}; all of them: `doit verify recipe=x format=json`" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("│ resolution"))
    assert "fail" in row and f" {COPIES} " in row  # the check's count of failures


def test_ignore_sets_findings_aside_with_the_reason(prefix):
    rules = VerifyRules(ignore=[IgnoreRule(path="lib/copies/*", reason="stray install copies")])
    before = verify_tree(_cfg(prefix))
    report = verify_tree(dataclasses.replace(_cfg(prefix), rules=rules))
    assert report.ok and report.checks["resolution"] == "pass", report.findings
    assert len(report.ignored) == len(before.findings) > COPIES  # resolution and symbols
    assert all(f.detail["ignored"] == "stray install copies" for f in report.ignored)
    text = report.render(width=200)
    assert (f"set aside by [verify] ignore (stray install copies): {len(before.findings)} finding(s) in "
            f"{COPIES} file(s), e.g. lib/copies/libuser0.so") in text
    again = VerifyReport.from_json(report.to_json())  # meta/verify.json keeps them
    assert len(again.ignored) == len(before.findings)


def test_an_ignore_rule_needs_a_reason():
    with pytest.raises(ValidationError, match="reason"):
        Recipe.model_validate({"name": "x", "source": {"kind": "path", "path": "x"},
                               "build": {"system": "cmake"},
                               "variants": {"release": {"build_type": "Release"}},
                               "verify": {"ignore": [{"path": "lib/*"}]}})
