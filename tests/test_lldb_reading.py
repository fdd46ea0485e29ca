"""verify's lldb-14 reading check on small real libraries: a library whose functions leave
their parameters unnamed in the source (`int f(int)`, common in PyTorch's kernels and
overrides) has nothing to read and must pass; one built with line tables only (-g1: lldb
lists no parameters at all) must still fail, naming the function."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orchestrator.verify.lldb_reading import probe, unreadable

UNNAMED = """\
namespace lr {
int unnamed_one(int) { return 1; }
double unnamed_two(double, int) { return 2.0; }
long unnamed_three(long, long, int) { return 3; }
}
"""
NAMED = UNNAMED.replace(
    "long unnamed_three",
    "int named(int count, double scale) { return int(count * scale) + 7; }\nlong unnamed_three")


def build(tmp: Path, name: str, text: str, *flags: str) -> Path:
    src = tmp / "src"
    src.mkdir(exist_ok=True)
    (src / f"{name}.cpp").write_text(text)
    out = tmp / f"lib{name}.so"
    subprocess.run(["g++", "-O2", "-gdwarf-4", "-fno-reorder-blocks-and-partition", *flags,
                    "-fPIC", "-shared", f"-ffile-prefix-map={src}=/orch/src",
                    str(src / f"{name}.cpp"), "-o", str(out)], check=True)
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory, session_toolchain) -> dict[str, dict]:
    tmp = tmp_path_factory.mktemp("lldb-reading")
    libs = {"unnamed": build(tmp, "unnamed", UNNAMED, "-g"),
            "named": build(tmp, "named", NAMED, "-g"),
            "lines": build(tmp, "lines", NAMED, "-g1")}
    got = probe(session_toolchain / "debs" / "root", Path("/usr/bin/python3"),
                list(libs.values()), sample=8)
    return {k: got[str(p)] for k, p in libs.items()}


def test_a_library_whose_parameters_are_all_unnamed_passes(results) -> None:
    r = results["unnamed"]
    assert r["own"] == 3 and r["unnamed"] == 3 and r["functions"] == [], r
    assert unreadable(r) is None


def test_named_parameters_are_what_is_sampled_and_read(results) -> None:
    r = results["named"]
    assert [f["name"] for f in r["functions"]] == ["lr::named(int, double)"], r
    assert r["functions"][0]["located"] == ["count", "scale"]
    assert r["unnamed"] == 3 and unreadable(r) is None


def test_line_tables_only_still_fail_naming_a_function(results) -> None:
    r = results["lines"]
    bad = unreadable(r)
    assert bad is not None and bad.missing == "no parameter names", r
    assert bad.function.startswith("lr::") and bad.where.startswith("/orch/src/lines.cpp:")
