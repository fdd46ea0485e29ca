"""The report people read, on three real successive nights of the demo: night 1 exports an
extra symbol that night 2 removes (an ABI regression, demangled: its own ⚠ state, failing
the night under fail_on, configurable), a cell that fails to build (stage + last lines of
the log), night 3 a push that fails (its own ⇡ state, not a build failure); commit, branch,
hosts and the night's wall time; links to each cell's log, record and JSON. The static
index.html is loaded in a real headless Chromium (Debian's) at 1400 px: plots present, the
page's script ran, no console errors, no horizontal overflow, a screenshot kept in
test-output/ (ORCH_TEST_OUTPUT moves it)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from conftest import REPO, run_doit

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
targets = ["demo_core"]
"""
PROBE = ("\nnamespace demo {\nDEMO_CORE_API int nightly_probe(int x);\n"
         "int nightly_probe(int x) { return x + 1; }\n}  // namespace demo\n")
CONSOLE = re.compile(r":CONSOLE[:(]\d+\)?\] (.*)")
# Injected into a copy of the page: the page's width against the window's, and what sticks out.
LAYOUT_PROBE = """<script>(function () {
  var d = document.documentElement, wide = [];
  document.querySelectorAll('body *').forEach(function (e) {
    var r = e.getBoundingClientRect();
    if (r.right > d.clientWidth + 1) wide.push(e.tagName + (e.id ? '#' + e.id : '') + ' ' + Math.round(r.right));
  });
  var plots = [];  // per plot: the legend over the axes? text outside the SVG (clipped)?
  document.querySelectorAll('.plot').forEach(function (p) {
    var svg = p.querySelector('svg').getBoundingClientRect(), clipped = 0;
    var ax = p.querySelector('#patch_2'), lg = p.querySelector('#legend_1');
    var a = ax && ax.getBoundingClientRect(), l = lg && lg.getBoundingClientRect();
    p.querySelectorAll('text').forEach(function (t) {
      var r = t.getBoundingClientRect();
      if (r.width && (r.left < svg.left - 1 || r.right > svg.right + 1 ||
                      r.top < svg.top - 1 || r.bottom > svg.bottom + 1)) clipped++;
    });
    plots.push({id: p.id, legend: !!l, clipped: clipped, overlap: !!(a && l && l.left < a.right &&
                l.right > a.left && l.top < a.bottom && l.bottom > a.top)});
  });
  d.dataset.probe = JSON.stringify({scrollWidth: d.scrollWidth, clientWidth: d.clientWidth,
                                    innerWidth: window.innerWidth, wide: wide.slice(0, 8), plots: plots});
})();</script>"""
WIDTH = 1400


def chromium(page: Path, tmp: Path, *extra: str) -> tuple[str, list[str]]:
    """The DOM after load and every console message, from a real headless Chromium."""
    exe = shutil.which("chromium")
    assert exe, "Debian's chromium is missing: run ./bootstrap.sh"
    proc = subprocess.run(
        [exe, "--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr", "--v=0",
         "--hide-scrollbars", f"--window-size={WIDTH},1000", f"--user-data-dir={tmp / 'chromium-profile'}",
         *extra, "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, [m[1] for m in CONSOLE.finditer(proc.stderr)]


def layout(page: Path, tmp: Path) -> tuple[str, dict, list[str]]:
    """The page at WIDTH px with LAYOUT_PROBE appended: its DOM, measurements and console."""
    probed = page.with_name(page.stem + "-probe.html")
    probed.write_text(page.read_text().replace("</body>", LAYOUT_PROBE + "</body>"))
    dom, console = chromium(probed, tmp)
    m = re.search(r'data-probe="([^"]*)"', dom)
    assert m, dom[:2000]
    return dom, json.loads(m[1].replace("&quot;", '"')), console


def screenshot(page: Path, tmp: Path, name: str) -> Path:
    """A full-width screenshot kept as test output (test-output/, or ORCH_TEST_OUTPUT)."""
    out_dir = Path(os.environ.get("ORCH_TEST_OUTPUT") or REPO / "test-output")
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / name
    proc = subprocess.run(
        [shutil.which("chromium") or "chromium", "--headless", "--disable-gpu", "--no-sandbox",
         "--hide-scrollbars", f"--window-size={WIDTH},2600", f"--user-data-dir={tmp / 'chromium-shot'}",
         f"--screenshot={out}", page.as_uri()], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", proc.stderr[-2000:]
    return out


def cache_env(tmp: Path, project: Path) -> dict[str, str]:
    """A signing key and a file:// cache whose `ac/` is a plain file: the push of a record fails."""
    keys = tmp / "keys"
    res = run_doit(project, "cache-keygen", "name=report-test", env={"ORCH_CACHE_KEY_DIR": str(keys)})
    assert res.returncode == 0, res.output
    public = res.stdout.strip().splitlines()[-1]
    cache = tmp / "cache"
    cache.mkdir()
    (cache / "ac").write_text("not a directory\n")
    cfg = tmp / "cache.toml"
    cfg.write_text(f'[cache]\nsubstituters = ["file://{cache}"]\ntrusted-keys = ["{public}"]\n')
    return {"ORCH_CACHE_CONFIG": str(cfg), "ORCH_CACHE_SIGNING_KEY": str(keys / "report-test.secret"),
            "ORCH_CACHE_KEY_DIR": str(keys)}


def test_three_nights_states_links_and_html_in_chromium(project, store, tmp_path):
    reports = tmp_path / "reports"
    core = project / "recipes" / "demo" / "core" / "core.cpp"
    original = core.read_text()
    with (project / "recipes" / "demo.toml").open("a") as f:
        f.write('\n[variants.broken]\nbuild_type = "Release"\ncflags = ["-fno-such-flag-for-test"]\n')
    git = ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "nightly-test"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "night"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    (project / "nightly.toml").write_text(CONFIG)
    core.write_text(original + PROBE)

    def night(run: str, *args: str, env: dict | None = None) -> tuple[dict, object]:
        res = run_doit(project, "nightly", f"run={run}", f"store={store}", f"reports={reports}", *args, env=env)
        assert res.returncode in (0, 1), res.output
        return json.loads((reports / f"nightly-{run}.json").read_text()), res

    first, res = night("n1")
    assert first["ok"] and res.returncode == 0, res.output
    assert first["cells"][0]["abi_diff"] is None  # nothing to compare with yet
    assert first["repo"]["commit"] == commit and first["repo"]["branch"] == "nightly-test"
    assert first["hosts"] and first["wall_seconds"] > 0 and first["finished"] >= first["started"]
    assert first["cells"][0]["origin"] == "built" and first["cells"][0]["build_seconds"] > 0
    html1 = (reports / "index.html").read_text()
    assert html1.count("No earlier successful night to compare with") == 1 and "id=abi-first" in html1
    core.write_text(original)  # night 2: the probe is gone
    (project / "nightly.toml").write_text(CONFIG + BROKEN)
    second, res = night("n2")
    release, broken = second["cells"]
    assert res.returncode == 1 and "2 cell(s) failed: demo/release (abi), demo/broken (build)" in res.stderr
    assert "⚠ demo/release: ABI regression: lib/libdemo_core.so: exported symbol removed: " \
           "demo::nightly_probe(int)" in res.stderr
    assert release["status"] == "ok" and release["state"] == "abi" and release["id"] != first["cells"][0]["id"]
    d = release["abi_diff"]
    assert d["against"] == {"run": "n1", "id": first["cells"][0]["id"]}
    lib = d["files"]["lib/libdemo_core.so"]
    assert lib["removed"] == ["demo::nightly_probe(int)"] and lib["added"] == []
    assert lib["size_delta"] < 0 and d["size_delta"] < 0
    assert d["regressions"] == ["lib/libdemo_core.so: exported symbol removed: demo::nightly_probe(int)"]
    assert broken["status"] == "failed" and broken["stage"] == "build" and broken["state"] == "failed"
    assert "-fno-such-flag-for-test" in broken["tail"]
    # The entry's targets reach the build as `doit build targets=` would: the same planned id.
    plan = run_doit(project, "plan", "recipe=demo", "variant=broken", "targets=demo_core", "format=json",
                    f"store={store}")
    failed = f"failed-{json.loads(plan.stdout)['id']}-demo-broken"
    assert broken["targets"] == ["demo_core"] and failed in broken["error"]
    md = (reports / "index.md").read_text()
    assert "REGRESSION: lib/libdemo_core.so: exported symbol removed: demo::nightly_probe(int)" in md
    assert "| ⚠ | demo/release | ABI regression |" in md
    assert "| demo/broken | failed (build) | build: " in md
    # fail_on is the configuration's: without "abi" the regression is shown but passes.
    for fail_on, failed in (('["abi"]', "1 cell(s) failed: demo/release (abi)"),
                            ('["verify", "smoke"]', None)):
        (project / "nightly.toml").write_text(f"fail_on = {fail_on}\n" + CONFIG + BROKEN)
        res = run_doit(project, "nightly", "report", "run=n2", f"store={store}", f"reports={reports}")
        assert res.returncode == (0 if failed is None else 1) and (failed or "") in res.stderr, res.output
        assert "⚠ demo/release: ABI regression" in res.stderr
    # Night 3: the same artifact (present, not rebuilt), a push that fails at the cache.
    (project / "nightly.toml").write_text(CONFIG + BROKEN)
    third, res = night("n3", "push=1", env=cache_env(tmp_path, project))
    pushed, _ = third["cells"]
    assert res.returncode == 1, res.output
    assert "2 cell(s) failed: demo/release (push), demo/broken (build)" in res.stderr, res.output
    assert pushed["state"] == "push" and pushed["stage"] == "push" and "ac/" in pushed["error"]
    assert "⇡ demo/release: push failed at push: " in res.stderr
    # The artifact's build time is night 2's, not night 3's: kept apart from the cell's wall time.
    assert pushed["origin"] == "present" and "build_seconds" not in pushed
    assert pushed["original_build_seconds"] == release["build_seconds"] and pushed["seconds"] > 0
    links = pushed["links"]
    assert links["json"] == "runs/n3/cells/demo@release.json" and (reports / links["json"]).is_file()
    assert links["log"] == "runs/n3/logs/demo@release.log" and (reports / links["log"]).is_file()
    assert Path(links["record"].removeprefix("file://")).is_file()

    page = reports / "index.html"
    html = page.read_text()
    # Self-contained: nothing to fetch (the only URLs are SVG/XLink namespace names).
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html)
    assert "Content-Security-Policy" in html and "<link" not in html
    dom, probe, console = layout(page, tmp_path)  # one Chromium run: the DOM and the layout
    assert console == [], console
    assert 'data-ready="1"' in dom  # the page's own script ran to its end
    for plot in ("plot-cell-time", "plot-build-time", "plot-size"):
        m = re.search(rf"<div class=\"plot\" id=\"{plot}\"><svg .*?</svg>", dom, re.S)
        assert m and "<path" in m[0] and ("demo/release" in m[0]), plot
    # The grid: one row per cell, one column per night (dated, details on hover), its states.
    grid = re.search(r'<table class="grid" id="grid">.*?</table>', dom, re.S)[0]
    heads = re.findall(r'<th title="(run n\d[^"]*)">(\d\d-\d\d \d\d:\d\d)<small>', grid)
    assert [h[0].split(";")[0] for h in heads] == ["run n1", "run n2", "run n3"], grid
    assert f"commit {commit[:12]} on nightly-test" in heads[0][0] and "wall " in heads[0][0]
    row = re.search(r"<tr><th>demo/release</th>(.*?)</tr>", grid)[1]
    assert re.findall(r'<td class="(\w+)"[^>]*>([^<]*)</td>', row) == [("ok", "✓"), ("abi", "⚠"), ("push", "⇡")]
    broken_row = re.search(r"<tr><th>demo/broken</th>(.*?)</tr>", grid)[1]
    assert re.findall(r'<td class="(\w+)"', broken_row) == ["none", "failed", "failed"]
    # The cells table: state, wall time apart from the build, human size, links that resolve.
    cells = re.search(r'<table id="cells">.*?</table>', dom, re.S)[0]
    assert "⇡ push failed (push)" in cells and "built once in" in cells
    assert re.search(r"<td class=\"nw\" title=\"\d+ bytes\">\d+\.\d (KiB|MiB)</td>", cells), cells
    for href in re.findall(r'<a href="([^"]+)">', cells):
        assert (Path(href.removeprefix("file://")) if href.startswith("file://") else reports / href).is_file(), href
    assert f"commit <code>{commit[:12]}</code> on branch <b>nightly-test</b>" in dom
    assert '<a href="nightly-n3.json">run JSON</a>' in dom
    assert "-fno-such-flag-for-test" in cells  # the failure's last lines
    # 1400 px: nothing sticks out of the window; a screenshot for people.
    assert probe["innerWidth"] == WIDTH, probe
    assert probe["scrollWidth"] <= probe["clientWidth"], probe
    # Readable plots: every label inside its SVG, the legend beside the data, not over it.
    assert [p["id"] for p in probe["plots"]] == ["plot-cell-time", "plot-build-time", "plot-size"]
    assert all(p["legend"] and not p["overlap"] and p["clipped"] == 0 for p in probe["plots"]), probe
    screenshot(page, tmp_path, "nightly-report-1400.png")  # every state but nogpu
    # The detectors themselves see a script error and an overflow (so the checks above mean something).
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><div style='width:2000px'>wide</div>"
                   "<script>no_such_function();</script></body></html>")
    _, probe, errors = layout(bad, tmp_path)
    assert any("no_such_function is not defined" in e for e in errors), errors
    assert probe["scrollWidth"] > probe["clientWidth"] and probe["wide"], probe



def test_plots_say_when_no_night_built_and_fit_the_bench_axis_to_its_medians() -> None:
    """Two nights that substituted a whole-tree artifact: the build-time plot is one sentence,
    not an empty frame, and the bench plot's y axis spans its medians (1.867 and 1.871 ms would
    sit on the top edge of an axis from 0); wall time keeps its 0-based axis."""
    from orchestrator.bot.report_html import _plots

    history = [{"run": f"n{i}", "started": f"2026-12-0{i}T01:00:00+00:00",
                "cells": [{"cell": "pytorch2/release", "seconds": 30.0 - i, "size": 400 * 2**20,
                           "original_build_seconds": 514.9, "bench": {"median": m}}]}
               for i, m in ((1, 1.867), (2, 1.871))]
    html = _plots(history)

    def plot(pid: str) -> str:
        return re.search(rf"id='{pid}'>(.*?)</div>", html, re.S)[1]

    def ticks(svg: str) -> list[float]:
        return [float(t) for t in re.findall(r"<text[^>]*>([0-9.]+)</text>", svg)]

    built = plot("plot-build-time")
    assert "<svg" not in built and "no night in this history built an artifact" in built
    assert min(ticks(plot("plot-cell-time"))) == 0
    bench = ticks(plot("plot-bench"))
    assert 1.8 < min(bench) <= 1.867 and 1.871 <= max(bench) < 1.9, bench
    # A history in which a night built keeps its build-time line.
    history[1]["cells"][0]["build_seconds"] = 512.0
    assert "<svg" in re.search(r"id='plot-build-time'>(.*?)</div>", _plots(history), re.S)[1]


def test_a_quiet_row_says_what_its_bench_found() -> None:
    """A night whose bench is not a regression still shows its verdict in the cells table (the
    PyTorch night: 0.988x, the interval excludes 1, within the 2% floor); a regression keeps
    its own line and class."""
    from orchestrator.bot.report_html import _cells_table

    perf = {"against": "n1", "ci": [0.9588, 0.9943], "ratio": 0.9882, "regression": False,
            "verdict": "no difference within noise", "range": "artifacts a..a"}
    cell = {"cell": "pytorch2/relwithdebinfo", "status": "ok", "state": "ok", "id": "58757fdebaa9",
            "seconds": 25.9, "perf": perf}
    html = _cells_table({"cells": [cell]})
    assert ("<p class='perf'>bench: no difference within noise, 0.988x the time of run n1 "
            "(95% CI 0.959–0.994)</p>") in html, html
    html = _cells_table({"cells": [cell | {"perf": perf | {"regression": True, "ratio": 1.2,
                                                             "ci": [1.1, 1.3], "verdict": "slower"}}]})
    assert "<p class='perf-regression'>PERF REGRESSION: 1.20x the time of run n1" in html, html
    assert "<p class='perf'>" not in html
    assert "<p class='perf" not in _cells_table({"cells": [cell | {"perf": None}]})
