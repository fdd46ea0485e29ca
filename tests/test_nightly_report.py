"""The report people read, on two real successive nights of the demo: night 1 exports an
extra symbol that night 2 removes (an ABI regression, demangled), a cell that fails to
build (stage + last lines of the log); the static index.html is loaded in a real headless
Chromium (Debian's): plots present, the page's script ran, no console errors."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from conftest import run_doit

CONFIG = """
[[matrix]]
recipe = "demo"
variants = ["release"]
smoke = ["python -c 'import demo; assert demo.add([1], [2]) == [3.0]'"]
"""
BROKEN = """
[[matrix]]
recipe = "demo"
variants = ["broken"]
"""
PROBE = ("\nnamespace demo {\nDEMO_CORE_API int nightly_probe(int x);\n"
         "int nightly_probe(int x) { return x + 1; }\n}  // namespace demo\n")
CONSOLE = re.compile(r":CONSOLE[:(]\d+\)?\] (.*)")


def chromium(page: Path, tmp: Path) -> tuple[str, list[str]]:
    """The DOM after load and every console message, from a real headless Chromium."""
    exe = shutil.which("chromium")
    assert exe, "Debian's chromium is missing: run ./bootstrap.sh"
    proc = subprocess.run(
        [exe, "--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr", "--v=0",
         f"--user-data-dir={tmp / 'chromium-profile'}", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, [m[1] for m in CONSOLE.finditer(proc.stderr)]


def test_two_nights_abi_regression_and_html_in_chromium(project, store, tmp_path):
    reports = tmp_path / "reports"
    core = project / "recipes" / "demo" / "core" / "core.cpp"
    original = core.read_text()
    with (project / "recipes" / "demo.toml").open("a") as f:
        f.write('\n[variants.broken]\nbuild_type = "Release"\ncflags = ["-fno-such-flag-for-test"]\n')
    (project / "nightly.toml").write_text(CONFIG)
    core.write_text(original + PROBE)

    def night(run: str) -> dict:
        res = run_doit(project, "nightly", f"run={run}", f"store={store}", f"reports={reports}")
        assert res.returncode in (0, 1), res.output
        return json.loads((reports / f"nightly-{run}.json").read_text())

    first = night("n1")
    assert first["ok"], first
    assert first["cells"][0]["abi_diff"] is None  # nothing to compare with yet
    core.write_text(original)  # night 2: the probe is gone
    (project / "nightly.toml").write_text(CONFIG + BROKEN)
    second = night("n2")
    release, broken = second["cells"]
    assert release["status"] == "ok" and release["id"] != first["cells"][0]["id"]
    d = release["abi_diff"]
    assert d["against"] == {"run": "n1", "id": first["cells"][0]["id"]}
    lib = d["files"]["lib/libdemo_core.so"]
    assert lib["removed"] == ["demo::nightly_probe(int)"] and lib["added"] == []
    assert lib["size_delta"] < 0 and d["size_delta"] < 0
    assert d["regressions"] == ["lib/libdemo_core.so: exported symbol removed: demo::nightly_probe(int)"]
    assert broken["status"] == "failed" and broken["stage"] == "build"
    assert "-fno-such-flag-for-test" in broken["tail"]
    md = (reports / "index.md").read_text()
    assert "REGRESSION: lib/libdemo_core.so: exported symbol removed: demo::nightly_probe(int)" in md
    assert "| demo/broken | failed (build) | build: " in md

    page = reports / "index.html"
    html = page.read_text()
    # Self-contained: nothing to fetch (the only URLs are SVG/XLink namespace names).
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html)
    assert "Content-Security-Policy" in html and "<link" not in html
    dom, console = chromium(page, tmp_path)
    assert console == [], console
    assert 'data-ready="1"' in dom  # the page's own script ran to its end
    for plot in ("plot-build-time", "plot-size"):
        m = re.search(rf"<div class=\"plot\" id=\"{plot}\"><svg .*?</svg>", dom, re.S)
        assert m and "<path" in m[0] and ("demo/release" in m[0]), plot
    assert "regression: lib/libdemo_core.so: exported symbol removed: demo::nightly_probe(int)" in dom
    assert 'id="grid"' in dom and dom.count("✓") >= 2 and "✗" in dom
    assert "-fno-such-flag-for-test" in dom  # the failure's last lines
    # The detector itself sees a script error (so an empty list above means something).
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><script>no_such_function();</script></body></html>")
    _, errors = chromium(bad, tmp_path)
    assert any("no_such_function is not defined" in e for e in errors), errors
