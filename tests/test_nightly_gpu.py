"""A GPU cell (cudademo with the locked CUDA toolkit's nvcc, locks/cuda13.toml): built and verified everywhere; its
CUDA smoke test (kernel round trip, result checked, CUDA_LAUNCH_BLOCKING=1) runs where
`nvidia-smi -L` sees a GPU, and is reported as skipped, with the reason, where none is."""
from __future__ import annotations

import json

from conftest import make_store, run_doit

from orchestrator.bot.cell import gpu_visible

CONFIG = """
[[matrix]]
recipe = "cudademo"
variants = ["release"]
requires_gpu = true
smoke = ["CUDA_LAUNCH_BLOCKING=1 cudademo_smoke 1048576"]
"""


def test_gpu_cell_builds_everywhere_and_smokes_only_on_a_gpu(project, tmp_path, session_cuda_toolchain):
    store = make_store(tmp_path / "store", session_cuda_toolchain)  # cudademo's lock: cuda13
    (project / "nightly.toml").write_text(CONFIG)
    reports = tmp_path / "reports"
    res = run_doit(project, "nightly", "matrix", "format=json", f"store={store}")
    assert json.loads(res.stdout)[0]["requires_gpu"] is True and json.loads(res.stdout)[0]["runs_on"] == "gpu"
    res = run_doit(project, "nightly", "cell=cudademo/release", "run=g1", f"store={store}",
                   f"reports={reports}")
    cell = json.loads((reports / "runs" / "g1" / "cells" / "cudademo@release.json").read_text())
    assert cell["id"] and cell["verify"]["ok"] and cell["verify"]["checks"]["cuda"] == "pass"
    visible, why = gpu_visible()
    if visible:
        assert res.returncode == 0, res.output
        assert cell["status"] == "ok" and cell["gpu"] == why
        [smoke] = cell["smoke"]
        assert smoke["command"].startswith("CUDA_LAUNCH_BLOCKING=1 ")
        assert "cudademo_smoke: ok, axpy on 1048576 elements matches" in smoke["output_tail"]
    else:
        assert res.returncode == 0, res.output
        assert cell["status"] == "skipped" and cell["stage"] == "smoke" and "smoke" not in cell
        assert cell["reason"].startswith("no GPU visible: nvidia-smi")
        assert "built and verified, smoke tests not run" in cell["reason"]
        assert "cudademo/release: skipped (no GPU visible: nvidia-smi" in res.stderr
    res = run_doit(project, "nightly", "report", "run=g1", f"store={store}", f"reports={reports}")
    assert res.returncode == 0, res.output
    md = (reports / "index.md").read_text()
    merged = json.loads((reports / "nightly-g1.json").read_text())
    if visible:
        assert "| cudademo/release | ok" in md and merged["cells"][0]["state"] == "ok"
    else:  # skipped, and it has never run on a GPU: said as such, not a bare "–"
        assert "| ∅ | cudademo/release | never ran on a GPU (smoke) | no GPU visible" in md
        assert merged["cells"][0]["state"] == "nogpu" and merged["cells"][0]["never_on_gpu"] is True
        assert "∅ cudademo/release: never ran on a GPU (no GPU visible" in res.stderr
        html = (reports / "index.html").read_text()
        assert "never ran on a GPU: no GPU visible" in html and "<td class='nogpu'" in html
