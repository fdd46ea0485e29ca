"""`doit why` names the files behind a changed source tree: up to 10 in the text, then how
many more; format=json lists them all (issue 35). Planned sides: nothing is built."""
from __future__ import annotations

import json
import shutil
from pathlib import Path


def test_why_lists_the_changed_files_of_a_changed_source(doit, project: Path, tmp_path: Path) -> None:  # noqa: ANN001
    other = tmp_path / "demo-edited"
    shutil.copytree(project / "recipes/demo", other)
    kernel = other / "ops/add_kernel.cpp"
    kernel.write_text(kernel.read_text() + "\n// edited\n")
    (other / "core/core.h").unlink()
    for i in range(12):
        (other / "ops" / f"extra_{i:02d}.h").write_text(f"// {i}\n")
    res = doit("why", f"source2={other}")
    assert res.returncode == 0, res.output
    out = res.stderr
    assert "source.tree_sha256:" in out, out
    assert "    ~ ops/add_kernel.cpp" in out, out
    shown = [ln for ln in out.splitlines() if ln.startswith("    ") and ln[4:6] in ("~ ", "+ ", "- ")]
    assert len(shown) == 10, out
    assert "    ... and 4 more file(s)" in out, out            # 1 changed + 12 added + 1 removed
    data = json.loads(doit("why", f"source2={other}", "format=json").stdout)
    [tree] = [c for c in data["changes"] if c["path"].endswith("tree_sha256")]
    assert tree["files"]["changed"] == ["ops/add_kernel.cpp"]
    assert tree["files"]["removed"] == ["core/core.h"]
    assert len(tree["files"]["added"]) == 12
