"""A comparison for people: the table (rich) and the SVG plot (matplotlib, every sample of
both sides in the order they ran, with each side's median)."""
from __future__ import annotations

import io
from pathlib import Path

from rich.table import Table

from orchestrator.bench.rounds import interleaved
from orchestrator.fs import write_atomic
from orchestrator.model.bench import BenchReport
from orchestrator.realise.explain import Change


def amount(value: float, unit: str) -> str:
    if unit != "s":
        return f"{value:.4g}"
    for scale, name in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if value >= scale:
            return f"{value / scale:.3g} {name}"
    return f"{value * 1e9:.3g} ns"


def table(report: BenchReport) -> Table:
    what = {"wall": "wall time", "cpu": "CPU time (user+sys)"}.get(
        report.measure, f"metric {report.metric!r}, {report.better} is better")
    t = Table(title=f"doit bench: {' '.join(report.command)}",
              caption=f"{what}; {report.rounds} rounds A B B A … after {report.warmup} warm-up "
                      f"run(s) each; CPU {report.cpu}")
    for col in ("", "id", "median", "IQR", "n"):
        t.add_column(col)
    for tag, side in (("A", report.a), ("B", report.b)):
        t.add_row(f"{tag} {side.label}", side.id[:10], amount(side.median, report.unit),
                  amount(side.iqr, report.unit), str(side.n))
    return t


def summary_lines(report: BenchReport) -> list[str]:
    lo, hi = report.ci
    head = f"B/A {report.ratio:.3f} ({report.confidence:.0%} CI {lo:.3f}–{hi:.3f}): "
    if report.verdict == "no verdict":
        lines = [head + "no verdict: " + report.why]
    elif report.verdict == "no difference within noise":
        lines = [head + f"no difference within noise ({report.why})"]
    else:
        lines = [head + f"B ({report.b.label}) is {report.verdict} than A ({report.a.label}) "
                 f"({report.why})"]
    if report.noise.reasons and report.noise.allowed:
        lines.append("noisy, verdict given anyway (allow_noisy=1): "
                     + "; ".join(report.noise.reasons))
    changes = [Change(d.path, d.op, d.old, d.new) for d in report.differences]
    lines.append(f"what differs ({len(changes)}, doit why):" if changes
                 else "what differs: nothing (the same derivation)")
    lines += [f"  {c.line()}" for c in changes]
    for tag, side in (("A", report.a), ("B", report.b)):
        lines.append(f"{tag} loaded from its own entry only: "
                     + (", ".join(entry_relative(lib, side.path) for lib in side.libraries)
                        or "no library of any artifact"))
    if report.plot:
        lines.append(f"plot: {report.plot}")
    return lines


def entry_relative(library: str, entry: str) -> str:
    """A loaded library's path inside its store entry (prefix/lib/libc10.so)."""
    return library.partition(f"/{Path(entry).name}/")[2] or library


def write_plot(report: BenchReport, path: Path) -> None:
    """The samples of both sides as an SVG at path (written beside it, then renamed)."""
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context({"svg.hashsalt": "orchestrator-bench", "svg.fonttype": "none"}):
        fig = Figure(figsize=(6.4, 3.4))
        ax = fig.add_subplot()
        for index, (tag, side) in enumerate((("A", report.a), ("B", report.b))):
            xs = positions(report, index)
            ax.plot(xs, side.samples, "o", label=f"{tag} {side.label}", color=f"C{index}")
            ax.axhline(side.median, color=f"C{index}", linewidth=1)
        lo, hi = report.ci
        ax.set_title(f"B/A {report.ratio:.3f} (CI {lo:.3f}–{hi:.3f}): {report.verdict}",
                     fontsize=9)
        ax.set_xlabel("run (in the order run)")
        ax.set_ylabel("seconds" if report.unit == "s" else report.metric)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
        fig.tight_layout()
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, buf.getvalue(), durable=False)


def positions(report: BenchReport, index: int) -> list[int]:
    """The run numbers of side `index`'s samples (the rounds interleave the sides; both sides
    may carry one label: an artifact against itself)."""
    return [i for i, side in enumerate(interleaved(report.rounds)) if side == index]
