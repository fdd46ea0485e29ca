"""Build output: a fixed-width progress bar whose label is cut at its end, one line per
phase with its time and a total, no blank lines when piped, tables as wide as the terminal."""
from __future__ import annotations

import io
import re
import time

from rich.console import Console

from orchestrator.console import build_progress, clip_end, label_width
from orchestrator.verify.report import FileFacts, VerifyReport, render_table

PHASE = re.compile(r"^✓ (configure|build|install|verify|commit)\s+\d+\.\ds\b")


def test_clip_end_keeps_the_start() -> None:
    assert clip_end("Building CXX object src/CMakeFiles/core.dir/a.cpp.o", 20) == "Building CXX object…"
    assert clip_end("short", 20) == "short"


def bar_lines(descriptions: list[str], total: int, width: int = 100) -> list[str]:
    con = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
    progress = build_progress("build", con)
    assert progress is not None
    task = progress.add_task("", total=total)
    out = []
    for i, d in enumerate(descriptions, 1):
        progress.update(task, completed=i, description=clip_end(d, label_width(width)))
        seg = con.render_lines(progress.get_renderable(), pad=False)
        out.append("".join(s.text for s in seg[0]).rstrip())
    return out


def test_progress_bar_has_a_fixed_width_and_cuts_the_label_at_the_end() -> None:
    long = "Building CXX object " + "very/long/path/" * 10 + "file.cpp.o"
    lines = bar_lines(["Linking x", long, "Building CXX object a.o"], total=3000)
    bars = [ln.index("build") for ln in lines]
    assert len(set(bars)) == 1
    ends = [ln.index(" 0:00:") for ln in lines]  # the bar + count columns end at one place
    assert len(set(ends)) == 1, lines
    assert "Building CXX object very/long" in lines[1]  # the start is kept
    assert len(lines[1]) <= 100
    assert build_progress("build", Console(file=io.StringIO(), force_terminal=False)) is None


def report(cuda: list[str]) -> VerifyReport:
    return VerifyReport(artifact="d" * 40 + "-demo-relwithdebinfo", root="/x", ok=True,
                        checks={"resolution": "pass", "cuda": "pass"}, findings=[],
                        files={"prefix/lib/libdemo.so": FileFacts(cuda=cuda)})


def test_verify_table_title_does_not_wrap_and_cpu_only_has_no_cuda_row() -> None:
    text = render_table(report([]), width=100)
    title = [ln for ln in text.splitlines() if ln.startswith("verify ")]
    assert title == [f"verify {'d' * 40}-demo-relwithdebinfo PASS"], text
    assert "cuda" not in text
    assert "cuda" in render_table(report(["sm_80"]), width=100)
    assert all(len(ln) <= 100 for ln in text.splitlines())


def test_build_prints_one_line_per_phase_a_total_and_no_blank_lines(doit) -> None:  # noqa: ANN001
    res = doit("build", "variant=release")
    assert res.returncode == 0, res.output
    lines = res.stderr.rstrip("\n").split("\n")
    assert "" not in lines, res.stderr
    phases = [m[1] for ln in lines if (m := PHASE.match(ln))]
    assert phases == ["configure", "build", "install", "verify", "commit"], res.stderr
    assert re.match(r"^\s+total\s+\d+\.\ds$", lines[-1]), res.stderr
    again = doit("build", "variant=release")  # present: no phases, no total
    assert again.returncode == 0 and not any(PHASE.match(ln) for ln in again.stderr.splitlines())


# --- issue 35: progress on every operation over ~2 s, on a terminal and off one ----------------

def _con(terminal: bool) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=80, force_terminal=terminal, color_system=None), buf


def test_a_long_operation_says_it_is_alive_off_a_terminal_and_ends_with_its_time() -> None:
    from orchestrator.console import working

    con, buf = _con(False)
    with working("lock: resolving locks/*.toml", on=con, first=0.5, every=0.6):
        time.sleep(1.5)
    lines = buf.getvalue().splitlines()
    beats = [ln for ln in lines if re.match(r"^lock: resolving locks/\*\.toml: still working \(\d+s\)$", ln)]
    assert len(beats) == 2, lines
    assert re.match(r"^✓ lock: resolving locks/\*\.toml \(1\.\ds\)$", lines[-1]), lines
    con, buf = _con(False)
    with working("quick", on=con, first=0.5):                     # under the threshold: silent
        pass
    assert buf.getvalue() == ""
    con, buf = _con(False)
    try:
        with working("gc: deleting", on=con, first=0.2, every=5):
            time.sleep(0.4)
            raise OSError("disk")
    except OSError:
        pass
    assert "✓" not in buf.getvalue(), buf.getvalue()              # a failure gets no ✓


def test_a_long_operation_on_a_terminal_shows_a_spinner() -> None:
    from orchestrator.console import working

    con, buf = _con(True)
    with working("push toolchain 48c59d0b: checking its files", on=con, first=0.3):
        time.sleep(0.6)
    out = buf.getvalue()
    assert "push toolchain 48c59d0b: checking its files" in out
    assert "✓ push toolchain 48c59d0b: checking its files (0." in out


def test_a_transfer_reports_bytes_off_a_terminal_and_draws_a_bar_on_one() -> None:
    from orchestrator.console import ByteProgress

    con, buf = _con(False)
    with ByteProgress("push toolchain 48c59d0b", 10_000_000, on=con, first=0.3, every=0.4) as m:
        for _ in range(5):
            time.sleep(0.2)
            m.advance(2_000_000)
    lines = buf.getvalue().splitlines()
    assert lines and all(re.match(r"^push toolchain 48c59d0b: \d+\.\d of 10\.0 MB, \d+\.\d MB/s "
                                  r"\(\d+s\)$", ln) for ln in lines), lines
    con, buf = _con(True)
    with ByteProgress("pull toolchain 48c59d0b", 10_000_000, on=con) as m:
        m.advance(5_000_000)
        m.progress.refresh()
    assert "pull toolchain 48c59d0b" in buf.getvalue() and "5.0/10.0 MB" in buf.getvalue()


def test_the_bar_names_the_step_ninja_is_running_while_it_prints_nothing(tmp_path) -> None:  # noqa: ANN001
    """Off a smart terminal ninja prints an edge only when it ends: while one long edge runs
    the bar names it from /proc (real ninja, a 4 s edge)."""
    import os

    from orchestrator.builders.process import RunningNames
    from orchestrator.builders.running_edges import running_edges
    from orchestrator.process_group import spawn

    (tmp_path / "build.ninja").write_text(
        "rule slow\n  command = python3 -c 'import time; time.sleep(4)' -o $out && touch $out\n"
        "  description = SLOW $out\n"
        "build obj/kernel.cpp.o: slow\n")
    step = spawn(["ninja", "-j1"], {**os.environ, "NINJA_STATUS": "[%f/%t] "}, str(tmp_path))
    con = Console(file=io.StringIO(), width=120, force_terminal=True, color_system=None)
    progress = build_progress("build", con)
    assert progress is not None
    task = progress.add_task("", total=None)
    ticker = RunningNames(progress, task, step.proc.pid, [time.monotonic()], label_width(120))
    ticker.start()
    try:
        seen: list[str] = []
        deadline = time.monotonic() + 3.5
        while time.monotonic() < deadline and not seen:
            seen = running_edges(step.proc.pid)
            time.sleep(0.2)
        assert seen == ["obj/kernel.cpp.o"], seen
        time.sleep(2.2)                              # idle past RunningNames.IDLE_S
        seg = con.render_lines(progress.get_renderable(), pad=False)
        bar = "".join(s.text for s in seg[0])
        assert "running: obj/kernel.cpp.o (" in bar, bar
    finally:
        ticker.stop()
        assert step.proc.stdout is not None
        step.proc.stdout.read()
        step.proc.wait()
        step.release()
    assert step.proc.returncode == 0


def test_a_child_that_has_forked_but_not_exec_d_is_not_named_a_running_edge() -> None:
    """Between fork and exec ninja's child shows ninja's own command line ('ninja -j1' was
    named as the running edge on a loaded CI machine): such a child runs nothing yet. A real
    fork that never execs stands in for that window; its exec'd sibling is still named."""
    import subprocess
    import sys

    from orchestrator.builders.running_edges import running_edges

    script = ("import os, subprocess, sys, time\n"
              "if os.fork() == 0:\n"
              "    time.sleep(30); os._exit(0)\n"
              "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)',"
              " '-o', 'obj/real.o'])\n"
              "print('ready', flush=True); time.sleep(30)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            process_group=0)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        seen: list[str] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and "obj/real.o" not in seen:
            seen = running_edges(proc.pid)
            time.sleep(0.1)
        assert seen == ["obj/real.o"], seen
    finally:
        import os
        import signal
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
