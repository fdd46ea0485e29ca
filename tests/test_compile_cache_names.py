"""ccache leaves the prefix-map options out of its hash (the paths they map differ between
checkouts and teammates), and those maps name the recipe and variant: /orch/src/<recipe>,
/orch/build/<recipe>-<variant>. The build's ccache namespace holds both names, so a recipe of
another name never gets the first one's objects, whose debug info names the other recipe's
paths (where neither its source map nor its artifact id points)."""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

SUMMARY = re.compile(r"compile cache: (\d+) hit\(s\), (\d+) miss\(es\)")


def build(doit, recipe: str) -> tuple[Path, tuple[int, int]]:
    res = doit("build", "format=json", f"recipe={recipe}", "variant=relwithdebinfo")
    assert res.returncode == 0, res.output[-3000:]
    m = SUMMARY.search(res.output)
    assert m, res.output
    return Path(json.loads(res.stdout.strip().splitlines()[-1])["path"]), (int(m[1]), int(m[2]))


def test_a_recipe_of_another_name_gets_no_objects_naming_the_first(project, doit) -> None:
    recipes = project / "recipes"
    (recipes / "demotwo.toml").write_text((recipes / "demo.toml").read_text())  # same source
    first, (_, misses) = build(doit, "demo")
    assert misses == 4
    second, counts = build(doit, "demotwo")
    assert counts == (0, 4), counts
    lib = (second / "prefix" / "lib" / "libdemo_ops.so").read_bytes()
    assert b"/orch/src/demotwo/ops/add_kernel.cpp" in lib
    assert b"/orch/src/demo/" not in lib and b"/orch/build/demo-" not in lib
    # The same recipe again, its artifact and build tree gone: every object still hits (the
    # namespace is per name, not per tree).
    store = project.parent / "store"
    for d in (store / "store", store / "build"):
        for dirpath, dirnames, _ in os.walk(d):
            for name in dirnames:
                os.chmod(os.path.join(dirpath, name), 0o755)
        shutil.rmtree(d)
    _, again = build(doit, "demo")
    assert again == (4, 0), again
