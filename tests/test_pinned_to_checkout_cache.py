"""The compile cache carries from a pinned PyTorch tree (built from its copy in the build
tree) to a `source=PATH` checkout of the same tree (built in place) (issue 33): both are
compiled through `<build tree>/source` (the copy, or a link to the checkout), so their compile
lines are the same and the checkout's build is all hits. On a PyTorch-shaped miniature (recipes/pytorch/minitorch)."""
from __future__ import annotations

import re
import shutil

from conftest import copy_project, run_doit
from test_pytorch2_checkout import MINI, tar_dir

SUMMARY = re.compile(r"compile cache: (\d+) hit\(s\), (\d+) miss\(es\)")


def minitorch_project(tmp_path):
    tree = tmp_path / "tree"  # a 2.x-shaped tree: what the builder takes as a checkout too
    shutil.copytree(MINI, tree, ignore=shutil.ignore_patterns("__pycache__"))
    (tree / "version.txt").write_text("2.6.0\n")
    archives = tmp_path / "archives"
    archives.mkdir()
    sha = tar_dir(tree, archives / "minitorch-2.6.0.tar.gz", "minitorch-2.6.0")
    project = copy_project(tmp_path / "project")
    (project / "recipes" / "minicc.toml").write_text(f"""
lock = "pytorch"
[source]
kind = "archive"
file = "minitorch-2.6.0.tar.gz"
sha256 = "{sha}"
[build]
system = "pytorch"
[build.pytorch]
version = "2.6.0"
python_extension = false
[variants.release]
build_type = "Release"
""")
    return project, archives


def test_pinned_tree_then_its_checkout_hits(tmp_path):
    project, archives = minitorch_project(tmp_path)
    checkout = tmp_path / "checkout"
    shutil.copytree(tmp_path / "tree", checkout)

    def build(*args: str) -> tuple[int, int]:
        res = run_doit(project, "build", "recipe=minicc", "variant=release", "substitute=0",
                       f"store={tmp_path / 'store'}", *args,
                       env={"ORCH_ARCHIVES": str(archives), "ORCH_NO_PROGRESS": "1"})
        assert res.returncode == 0, res.output[-3000:]
        m = SUMMARY.search(res.output)
        assert m, res.output
        return int(m[1]), int(m[2])

    hits, misses = build()
    assert misses > 0
    assert build(f"source={checkout}") == (misses, 0)

