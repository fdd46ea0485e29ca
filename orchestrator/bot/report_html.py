"""index.html: one static, self-contained page (inline CSS, inline SVG plots from matplotlib,
a few lines of inline script; a Content-Security-Policy forbids every network load).

Sections: the latest run's cells (status, failing stage, last lines of the failure, commit
of a tracked branch), a pass/fail grid over the last runs, build time and artifact size per
cell over the history, and per cell the ABI diff against its previous successful night.
"""
from __future__ import annotations

import io
from html import escape
from typing import Any

from orchestrator.bench.trend import perf_line
from orchestrator.bot.report import failure_reason

GRID_RUNS = 14
CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
       "img-src data:")
STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{margin:0 0 .2em}table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
.ok{background:#d9f2d9}.failed{background:#f8d0d0}.skipped{background:#eee}.missing{background:#fbe7c6}
.none{background:#fff}pre{background:#f6f6f6;padding:.5em;max-width:90ch;overflow:auto;margin:.3em 0}
.reg{color:#b00;font-weight:bold}.plots{display:flex;flex-wrap:wrap;gap:1em}
.plot svg{max-width:640px;height:auto}code{font-size:90%}.grid td{text-align:center;min-width:2.2em}
"""
SCRIPT = """
document.getElementById('only-problems').addEventListener('change', function (e) {
  document.querySelectorAll('#cells tbody tr.ok').forEach(function (tr) {
    tr.style.display = e.target.checked ? 'none' : '';
  });
});
document.documentElement.dataset.ready = '1';
"""


def _svg_plot(title: str, ylabel: str, runs: list[str], series: dict[str, list[float | None]]) -> str:
    """One line per cell over the runs, as inline SVG (no XML prolog)."""
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context({"svg.hashsalt": "orchestrator-nightly", "svg.fonttype": "none"}):
        fig = Figure(figsize=(6.4, 3.2))
        ax = fig.add_subplot()
        xs = list(range(len(runs)))
        for name, ys in sorted(series.items()):
            pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.set_xticks(xs, [r[-13:] for r in runs], rotation=30, ha="right", fontsize=7)
        ax.set_ylim(bottom=0)
        if series:
            ax.legend(fontsize=7)
        fig.tight_layout()
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _plots(history: list[dict[str, Any]]) -> str:
    runs = [h["run"] for h in history]
    names = sorted({c["cell"] for h in history for c in h["cells"]})
    by_run = [{c["cell"]: c for c in h["cells"]} for h in history]
    secs = {n: [r.get(n, {}).get("build_seconds") for r in by_run] for n in names}
    size = {n: [(r[n]["size"] / 1e6 if r.get(n, {}).get("size") else None) for r in by_run]
            for n in names}
    return ("<div class=plots>"
            f"<div class='plot' id='plot-build-time'>{_svg_plot('Build time per cell', 'seconds', runs, secs)}</div>"
            f"<div class='plot' id='plot-size'>{_svg_plot('Artifact size per cell', 'MB', runs, size)}</div>"
            + _bench_plot(runs, names, by_run) + "</div>")


def _bench_plot(runs: list[str], names: list[str], by_run: list[dict[str, Any]]) -> str:
    """The cells' bench medians over the nights (only when some cell has a bench)."""
    medians = {n: [((r.get(n) or {}).get("bench") or {}).get("median") for r in by_run]
               for n in names}
    medians = {n: ys for n, ys in medians.items() if any(y is not None for y in ys)}
    if not medians:
        return ""
    return (f"<div class='plot' id='plot-bench'>"
            f"{_svg_plot('Bench median per cell', 'seconds or metric', runs, medians)}</div>")


def _cells_table(merged: dict[str, Any]) -> str:
    rows = []
    for c in merged["cells"]:
        status = c["status"] + (f" ({c['stage']})" if c.get("stage") else "")
        detail = escape(failure_reason(c))
        if perf := perf_line(c):
            detail += f"<p class='perf-regression'>{escape(perf)}</p>"
        if c["status"] == "failed" and c.get("tail"):
            detail += f"<pre>{escape(c['tail'])}</pre>"
        src = c.get("source")
        commit = (f"{escape(src['branch'])} @ <code>{escape(src['commit'][:12])}</code>" if src else "")
        g = c.get("glibc") or {}
        rows.append(
            f"<tr class='{escape(c['status'])}'><td>{escape(c['cell'])}</td><td>{escape(status)}</td>"
            f"<td>{detail}</td><td>{commit}</td><td><code>{escape(c.get('id', '')[:12])}</code></td>"
            f"<td>{escape(str(c.get('origin', '')))}</td><td>{c.get('build_seconds') or ''}</td>"
            f"<td>{c.get('size', '')}</td><td>{escape(g.get('GLIBC', ''))} / "
            f"{escape(g.get('GLIBCXX', ''))}</td></tr>")
    return ("<label><input type=checkbox id=only-problems> only cells with problems</label>"
            "<table id=cells><thead><tr><th>cell</th><th>status</th><th>reason / last lines</th>"
            "<th>branch</th><th>id</th><th>origin</th><th>build s</th><th>size</th>"
            "<th>GLIBC / GLIBCXX</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _grid(history: list[dict[str, Any]]) -> str:
    runs = history[-GRID_RUNS:]
    names: list[str] = []
    for h in reversed(runs):
        names += [c["cell"] for c in h["cells"] if c["cell"] not in names]
    head = "".join(f"<th title='{escape(h['run'])}'>{escape(h['run'][-7:])}</th>" for h in runs)
    body = []
    for n in names:
        tds = []
        for h in runs:
            c = next((x for x in h["cells"] if x["cell"] == n), None)
            st = c["status"] if c else "none"
            mark = {"ok": "✓", "failed": "✗", "skipped": "–", "missing": "?"}.get(st, "")
            tip = escape(failure_reason(c) if c else "not in this run")
            tds.append(f"<td class='{st}' title='{tip}'>{mark}</td>")
        body.append(f"<tr><th>{escape(n)}</th>{''.join(tds)}</tr>")
    return (f"<table class=grid id=grid><thead><tr><th>cell</th>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


def _abi(merged: dict[str, Any]) -> str:
    out = []
    for c in merged["cells"]:
        d = c.get("abi_diff")
        if c.get("id") is None:
            continue
        if not d:
            out.append(f"<h3>{escape(c['cell'])}</h3><p>no earlier successful night to compare with</p>")
            continue
        if "error" in d:
            out.append(f"<h3>{escape(c['cell'])}</h3><p>{escape(d['error'])}</p>")
            continue
        against = f"{escape(d['against']['run'])} (<code>{escape(d['against']['id'][:12])}</code>)"
        parts = [f"<h3>{escape(c['cell'])}</h3><p>against {against}: +{d['added']} / "
                 f"−{d['removed']} exported symbols, size {d['size_delta']:+d} bytes</p>"]
        if d["regressions"]:
            parts.append("<ul class=reg>" + "".join(f"<li>regression: {escape(r)}</li>"
                                                    for r in d["regressions"][:50]) + "</ul>")
        for path, f in d["files"].items():
            items = [f"<li class=reg>removed: <code>{escape(s)}</code></li>" for s in f.get("removed", [])[:200]]
            items += [f"<li>added: <code>{escape(s)}</code></li>" for s in f.get("added", [])[:200]]
            if "soname" in f:
                items.append(f"<li class=reg>SONAME {escape(str(f['soname'][0]))} → {escape(str(f['soname'][1]))}</li>")
            for k, v in (f.get("needed") or {}).items():
                items += [f"<li>DT_NEEDED {k}: <code>{escape(n)}</code></li>" for n in v]
            for lib, (a, b) in (f.get("glibc") or {}).items():
                items.append(f"<li>highest {lib}: {escape(str(a))} → {escape(str(b))}</li>")
            if f.get("size_delta"):
                items.append(f"<li>size {f['size_delta']:+d} bytes</li>")
            parts.append(f"<details {'open' if f.get('removed') else ''}><summary><code>{escape(path)}</code> "
                         f"{escape(f['status'])}</summary><ul>{''.join(items)}</ul></details>")
        out.append("".join(parts))
    return "".join(out) or "<p>no artifacts in this run</p>"


def render_html(history: list[dict[str, Any]], merged: dict[str, Any]) -> str:
    verdict = "ok" if merged["ok"] else "FAILED"
    counts = ", ".join(f"{v} {k}" for k, v in sorted(merged["counts"].items()))
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
        f"<title>Nightly {escape(merged['run'])}: {verdict}</title><style>{STYLE}</style></head><body>"
        f"<h1>Nightly builds</h1><p id=verdict class='{'ok' if merged['ok'] else 'failed'}'>"
        f"run <b>{escape(merged['run'])}</b> started {escape(str(merged.get('started')))}: "
        f"<b>{verdict}</b> ({escape(counts)})</p>"
        f"<h2>Cells</h2>{_cells_table(merged)}"
        f"<h2>Last {min(GRID_RUNS, len(history))} runs</h2>{_grid(history)}"
        f"<h2>History</h2>{_plots(history)}"
        f"<h2>ABI against the previous successful night</h2>{_abi(merged)}"
        f"<script>{SCRIPT}</script></body></html>\n")
