"""index.html: one static, self-contained page (inline CSS, inline SVG plots from matplotlib,
a few lines of inline script; a Content-Security-Policy forbids every network load).

Sections: the night (start, its own wall time, commit/branch/tree, hosts, links to its JSON),
the latest run's cells (state, failing stage, last lines of the failure, cell wall time apart
from the artifact's own build time, human sizes, links to the cell's log, artifact record and
JSON), a state grid over the last runs (dates, details on hover), per-cell plots over the
history, and per cell the ABI diff against its previous successful night.
"""
from __future__ import annotations

import datetime as dt
import io
from html import escape
from typing import Any

from orchestrator.bench.trend import perf_line
from orchestrator.bot.report import failure_reason
from orchestrator.bot.states import MARKS, WORDS, cell_state, human_seconds, human_size

GRID_RUNS = 14
CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
       "img-src data:")
STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;max-width:1800px}
h1{margin:0 0 .2em}table{border-collapse:collapse;margin:.5em 0 1.5em;max-width:100%}
td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
td.reason{overflow-wrap:anywhere;min-width:30ch}.nw{white-space:nowrap}
.ok{background:#d9f2d9}.failed{background:#f8d0d0}.skipped{background:#eee}.missing{background:#fbe7c6}
.abi{background:#fff0b3}.push{background:#fde0c8}.nogpu{background:#e4e4f4}
.none{background:#fff}pre{background:#f6f6f6;padding:.5em;max-width:70ch;white-space:pre-wrap;
overflow-wrap:anywhere;margin:.3em 0}
.reg{color:#b00;font-weight:bold}.plots{display:flex;flex-wrap:wrap;gap:1em}
.plot svg{max-width:100%;height:auto}code{font-size:90%}.grid td{text-align:center;min-width:2.2em}
.grid th small{display:block;font-weight:normal;color:#555}.notice{color:#555;font-style:italic}
li{overflow-wrap:anywhere}.links a{margin-right:.4em}
"""
SCRIPT = """
document.getElementById('only-problems').addEventListener('change', function (e) {
  document.querySelectorAll('#cells tbody tr.ok').forEach(function (tr) {
    tr.style.display = e.target.checked ? 'none' : '';
  });
});
document.documentElement.dataset.ready = '1';
"""


def _when(iso: str | None) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(iso) if iso else None
    except ValueError:
        return None


def _date_label(h: dict[str, Any]) -> str:
    t = _when(h.get("started"))
    return t.strftime("%m-%d %H:%M") if t else h["run"][-11:]


def _svg_plot(title: str, ylabel: str, labels: list[str], series: dict[str, list[float | None]],
              *, zero_based: bool = True, empty: str = "") -> str:
    """One line per cell over the runs, as inline SVG (no XML prolog); the legend outside.

    `zero_based=False` fits the y axis to the data (a bench median moves by a few percent, which
    a 0-based axis flattens onto its top edge). With no point at all the plot is the sentence
    `empty` instead of an empty frame."""
    if empty and not any(y is not None for ys in series.values() for y in ys):
        return f"<p class='empty-plot'><b>{escape(title)}</b>: {escape(empty)}</p>"
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context({"svg.hashsalt": "orchestrator-nightly", "svg.fonttype": "none"}):
        fig = Figure(figsize=(6.2, 3.2))
        ax = fig.add_subplot()
        xs = list(range(len(labels)))
        for name, ys in sorted(series.items()):
            pts = [(x, y) for x, y in zip(xs, ys, strict=False) if y is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.set_xticks(xs, labels, rotation=30, ha="right", fontsize=7)
        if zero_based:
            ax.set_ylim(bottom=0)
            ax.margins(x=0.08)
        else:
            ax.margins(x=0.08, y=0.25)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    text = buf.getvalue()
    return text[text.index("<svg"):]


NO_BUILD = ("no night in this history built an artifact: each cell's was present or pulled from the "
            "cache (its original build time is in the cells table)")


def _plots(history: list[dict[str, Any]]) -> str:
    labels = [_date_label(h) for h in history]
    names = sorted({c["cell"] for h in history for c in h["cells"]})
    by_run = [{c["cell"]: c for c in h["cells"]} for h in history]
    wall = {n: [r.get(n, {}).get("seconds") for r in by_run] for n in names}
    built = {n: [r.get(n, {}).get("build_seconds") for r in by_run] for n in names}
    size = {n: [(r[n]["size"] / 2**20 if r.get(n, {}).get("size") else None) for r in by_run]
            for n in names}
    return ("<div class=plots>"
            f"<div class='plot' id='plot-cell-time'>"
            f"{_svg_plot('Cell wall time per night', 'seconds', labels, wall)}</div>"
            f"<div class='plot' id='plot-build-time'>"
            f"{_svg_plot('Build time (nights that built)', 'seconds', labels, built, empty=NO_BUILD)}</div>"
            f"<div class='plot' id='plot-size'>{_svg_plot('Artifact size per cell', 'MiB', labels, size)}</div>"
            + _bench_plot(labels, names, by_run) + "</div>")


def _bench_plot(labels: list[str], names: list[str], by_run: list[dict[str, Any]]) -> str:
    """The cells' bench medians over the nights (only when some cell has a bench)."""
    medians = {n: [((r.get(n) or {}).get("bench") or {}).get("median") for r in by_run]
               for n in names}
    medians = {n: ys for n, ys in medians.items() if any(y is not None for y in ys)}
    if not medians:
        return ""
    return (f"<div class='plot' id='plot-bench'>"
            f"{_svg_plot('Bench median per cell', 'seconds or metric', labels, medians, zero_based=False)}</div>")


def _state_text(c: dict[str, Any]) -> tuple[str, str]:
    state = c.get("state") or cell_state(c)
    word = c["status"] if state in ("ok", "failed", "skipped") else WORDS[state]
    return state, f"{MARKS[state]} {word}" + (f" ({c['stage']})" if c.get("stage") else "")


def _links(c: dict[str, Any]) -> str:
    links = c.get("links") or {}
    return "".join(f"<a href='{escape(links[k])}'>{k}</a>" for k in ("log", "record", "json") if links.get(k))


def _times(c: dict[str, Any]) -> str:
    if c.get("build_seconds") is not None:
        return f"built this night in {human_seconds(c['build_seconds'])}"
    if c.get("id"):
        orig = c.get("original_build_seconds")
        return f"{escape(str(c.get('origin', '')))}" + (f"; built once in {human_seconds(orig)}" if orig else "")
    return ""


def _perf_note(c: dict[str, Any]) -> str:
    """'' or the bench verdict of a night that is not a regression (a regression has
    perf_line's), so a quiet row still says what its bench found."""
    p = c.get("perf") or {}
    if p.get("regression") or p.get("ratio") is None or not p.get("ci"):
        return ""
    return (f"bench: {p.get('verdict', '')}, {p['ratio']:.3f}x the time of run {p.get('against', '')} "
            f"(95% CI {p['ci'][0]:.3f}–{p['ci'][1]:.3f})")


def _cells_table(merged: dict[str, Any]) -> str:
    rows = []
    for c in merged["cells"]:
        state, text = _state_text(c)
        detail = escape(failure_reason(c))
        if state == "nogpu":
            detail = "never ran on a GPU: " + detail
        elif c.get("last_on_gpu"):
            detail += f" (last ran on a GPU in {escape(c['last_on_gpu'])})"
        regs = (c.get("abi_diff") or {}).get("regressions") or []
        if regs:
            detail += "".join(f"<p class=reg>ABI regression: {escape(r)}</p>" for r in regs[:3])
        if perf := perf_line(c):
            detail += f"<p class='perf-regression'>{escape(perf)}</p>"
        elif perf := _perf_note(c):
            detail += f"<p class='perf'>{escape(perf)}</p>"
        if c["status"] == "failed" and c.get("tail"):
            detail += f"<pre>{escape(c['tail'])}</pre>"
        src = c.get("source")
        commit = (f"{escape(src['branch'])} @ <code>{escape(src['commit'][:12])}</code>" if src else "")
        g = c.get("glibc") or {}
        rows.append(
            f"<tr class='{state}'><td class=nw>{escape(text)}</td><td class=nw>{escape(c['cell'])}</td>"
            f"<td class=reason>{detail}</td><td>{commit}</td>"
            f"<td class=nw><code>{escape(c.get('id', '')[:12])}</code></td>"
            f"<td class=nw>{human_seconds(c.get('seconds'))}</td><td>{_times(c)}</td>"
            f"<td class=nw title='{c.get('size', '')} bytes'>{human_size(c.get('size'))}</td>"
            f"<td class=nw>{escape(g.get('GLIBC', ''))} / {escape(g.get('GLIBCXX', ''))}</td>"
            f"<td class='links nw'>{_links(c)}</td></tr>")
    return ("<label><input type=checkbox id=only-problems> only cells with problems</label>"
            "<table id=cells><thead><tr><th>state</th><th>cell</th><th>reason / last lines</th>"
            "<th>branch</th><th>id</th><th>cell wall</th><th>artifact</th><th>size</th>"
            "<th>GLIBC / GLIBCXX</th><th>links</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _night_title(h: dict[str, Any]) -> str:
    repo = h.get("repo") or {}
    return (f"run {h['run']}; started {h.get('started')}; wall {human_seconds(h.get('wall_seconds'))}; "
            f"commit {(repo.get('commit') or '?')[:12]} on {repo.get('branch') or '?'}; "
            f"hosts {', '.join(h.get('hosts') or []) or '?'}; {'ok' if h.get('ok') else 'FAILED'}")


def _grid(history: list[dict[str, Any]]) -> str:
    runs = history[-GRID_RUNS:]
    names: list[str] = []
    for h in reversed(runs):
        names += [c["cell"] for c in h["cells"] if c["cell"] not in names]
    head = "".join(f"<th title='{escape(_night_title(h))}'>{escape(_date_label(h))}"
                   f"<small>{escape(h['run'][-8:])}</small></th>" for h in runs)
    body = []
    for n in names:
        tds = []
        for h in runs:
            c = next((x for x in h["cells"] if x["cell"] == n), None)
            state = (c.get("state") or cell_state(c)) if c else "none"
            tip = (f"{WORDS[state]}; {failure_reason(c)}; cell wall {human_seconds(c.get('seconds'))}"
                   if c else "not in this run")
            tds.append(f"<td class='{state}' title='{escape(tip)}'>{MARKS.get(state, '')}</td>")
        body.append(f"<tr><th>{escape(n)}</th>{''.join(tds)}</tr>")
    legend = " ".join(f"{MARKS[s]} {WORDS[s]}" for s in MARKS)
    return (f"<table class=grid id=grid><thead><tr><th>cell</th>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table><p class=notice>{escape(legend)}</p>")


def _abi(merged: dict[str, Any]) -> str:
    out = []
    first = [c["cell"] for c in merged["cells"] if c.get("id") and not c.get("abi_diff")]
    if first:
        out.append(f"<p class=notice id=abi-first>No earlier successful night to compare with: "
                   f"{escape(', '.join(first))}.</p>")
    for c in merged["cells"]:
        d = c.get("abi_diff")
        if c.get("id") is None or not d:
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


def _night(merged: dict[str, Any]) -> str:
    repo = merged.get("repo") or {}
    commit = (f"commit <code>{escape((repo.get('commit') or '')[:12])}</code> on branch "
              f"<b>{escape(repo.get('branch') or '(detached)')}</b>, tree "
              f"<code>{escape((repo.get('tree') or '')[:12])}</code>"
              + (" (uncommitted changes)" if repo.get("dirty") else "")) if repo else "no git commit recorded"
    run = escape(merged["run"])
    return (f"<p id=night>started {escape(str(merged.get('started')))}, finished "
            f"{escape(str(merged.get('finished')))}: the night's wall time "
            f"<b>{human_seconds(merged.get('wall_seconds'))}</b>; {commit}; host(s) "
            f"{escape(', '.join(merged.get('hosts') or []) or '?')}; fails on "
            f"{escape(', '.join(merged.get('fail_on') or []))}. <span class=links>"
            f"<a href='nightly-{run}.json'>run JSON</a><a href='history.json'>history JSON</a></span></p>")


def render_html(history: list[dict[str, Any]], merged: dict[str, Any]) -> str:
    verdict = "ok" if merged["ok"] else "FAILED"
    counts = ", ".join(f"{v} {WORDS.get(k, k)}" for k, v in sorted(merged["counts"].items()))
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
        f"<title>Nightly {escape(merged['run'])}: {verdict}</title><style>{STYLE}</style></head><body>"
        f"<h1>Nightly builds</h1><p id=verdict class='{'ok' if merged['ok'] else 'failed'}'>"
        f"run <b>{escape(merged['run'])}</b>: <b>{verdict}</b> ({escape(counts)})</p>{_night(merged)}"
        f"<h2>Cells</h2>{_cells_table(merged)}"
        f"<h2>Last {min(GRID_RUNS, len(history))} runs</h2>{_grid(history)}"
        f"<h2>History</h2>{_plots(history)}"
        f"<h2>ABI against the previous successful night</h2>{_abi(merged)}"
        f"<script>{SCRIPT}</script></body></html>\n")
