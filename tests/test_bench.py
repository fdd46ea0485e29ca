"""`doit bench` and `doit run` on real small builds (benchkernel, demo): no timed assertions.

The known-difference pair is benchkernel's `twice` against `release` (the same kernel doing
twice the steps); the verdicts that must not depend on the machine read a metric the command
prints (one JSON line) instead of a clock."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from orchestrator.bench.stats import FASTER, MIN_EFFECT, REFUSED, SAME, SLOWER, Summary, verdict
from orchestrator.model.bench import BenchReport

KERNEL = ("recipe=benchkernel",)


@pytest.fixture
def cmd(doit, store):
    """doit with the store's variable before the command's `--` (the fixture's would land in
    the command)."""
    return lambda *args: doit(*args[:1], f"store={store}", *args[1:])


def report_of(res) -> BenchReport:
    assert res.returncode == 0, res.output
    return BenchReport.model_validate_json(res.stdout.strip().splitlines()[-1])


def built(doit, recipe: str, *variants: str) -> dict[str, Path]:
    paths = {}
    for v in variants:
        res = doit("build", f"recipe={recipe}", f"variant={v}", "format=json")
        assert res.returncode == 0, res.output
        paths[v] = Path(__import__("json").loads(res.stdout.strip().splitlines()[-1])["path"])
    return paths


def test_twice_the_work_is_slower_with_an_interval_excluding_one(doit, cmd, tmp_path) -> None:
    built(doit, "benchkernel", "release", "twice")
    plot = tmp_path / "plot.svg"
    res = cmd("bench", *KERNEL, "variants=release,twice", "rounds=6", "metric=cpu_seconds",
               "allow_noisy=1", f"plot={plot}", "format=json", "--", "benchkernel", "10")
    report = report_of(res)
    assert report.verdict == SLOWER and report.ci[0] > 1.0, report
    assert report.a.label == "release" and report.b.label == "twice"
    assert report.a.n == report.b.n == 6 and report.order[:4] == ["A", "B", "B", "A"]
    assert report.a.name.endswith("-benchkernel-release") and report.b.name.endswith("-twice")
    assert {"path": "variant.defines.BENCHKERNEL_WORK", "op": "+", "old": None, "new": "2"} in \
        [d.model_dump() for d in report.differences]
    assert report.plot == str(plot) and "<svg" in plot.read_text()
    # the human table names both sides and the verdict
    res = cmd("bench", *KERNEL, "variants=release,twice", "rounds=2", "measure=cpu",
               "allow_noisy=1", f"plot={plot}", "--", "benchkernel", "10")
    assert res.returncode == 0, res.output
    assert "A release" in res.output and "B twice" in res.output and "B/A" in res.output


def test_the_same_artifact_twice_is_no_difference(doit, cmd, tmp_path) -> None:
    [path] = built(doit, "benchkernel", "release").values()
    artifact_id = path.name[:12]
    res = cmd("bench", *KERNEL, f"ids={artifact_id},{artifact_id}", "rounds=16",
               "metric=cpu_seconds", "allow_noisy=1", f"plot={tmp_path / 'p.svg'}", "format=json",
               "--", "benchkernel", "5")
    report = report_of(res)
    # SAME either way: the interval holds 1, or (one comparison in twenty of the same thing at
    # 95 %) it excludes 1 and the ratio is within min_effect of 1, what layout alone makes
    assert report.verdict == SAME and report.min_effect == MIN_EFFECT, report
    assert report.ci[0] <= 1.0 <= report.ci[1] or abs(report.ratio - 1) < MIN_EFFECT, report
    assert report.differences == [] and report.a.id == report.b.id


def test_a_metric_decides_without_a_clock(doit, cmd, tmp_path) -> None:
    """Metric values the command prints (no timing): B's is 3x A's → slower, CI excludes 1;
    a command whose metric alternates 1/10 is unsteady → no verdict without allow_noisy."""
    built(doit, "benchkernel", "release", "twice")
    script = ('case "$ORCH_PROFILE" in *-twice) v=3;; *) v=1;; esac; '
              'echo noise; echo "{\\"ms\\": $v}"')
    res = cmd("bench", *KERNEL, "variants=release,twice", "rounds=4", "metric=ms",
               "allow_noisy=1", f"plot={tmp_path / 'p.svg'}", "format=json", "--",
               "sh", "-c", script)
    report = report_of(res)
    assert report.a.samples == [1.0] * 4 and report.b.samples == [3.0] * 4
    assert report.ratio == 3.0 and report.ci == (3.0, 3.0) and report.verdict == SLOWER
    flip = tmp_path / "flip"
    alternating = (f'if [ -e {flip} ]; then rm {flip}; v=10; else touch {flip}; v=1; fi; '
                   'echo "{\\"ms\\": $v}"')
    res = cmd("bench", *KERNEL, "variants=release,twice", "rounds=4", "metric=ms",
               f"plot={tmp_path / 'p.svg'}", "format=json", "--", "sh", "-c", alternating)
    report = report_of(res)
    assert report.verdict == REFUSED and "unsteady" in report.why, report
    # B 1% above A every time: the interval (1.01, 1.01) excludes 1, but 1% is under the
    # default min_effect (2%): no difference; min_effect=0 lets the interval alone decide
    small = 'case "$ORCH_PROFILE" in *-twice) v=1.01;; *) v=1;; esac; echo "{\\"ms\\": $v}"'
    for floor, word in (((), SAME), (("min_effect=0",), SLOWER), (("min_effect=0.5%",), SLOWER)):
        res = cmd("bench", *KERNEL, "variants=release,twice", "rounds=3", "metric=ms", *floor,
                  "allow_noisy=1", f"plot={tmp_path / 'p.svg'}", "format=json", "--",
                  "sh", "-c", small)
        report = report_of(res)
        assert report.ci == (1.01, 1.01) and report.verdict == word, (floor, report)
        assert ("within 2% of 1" in report.why) == (word == SAME), report.why


def test_machine_noise_refuses_a_verdict() -> None:
    steady = Summary(1.0, 0.99, 1.01, 10)
    slower = Summary(2.0, 1.99, 2.01, 10)
    assert verdict(steady, slower, (1.9, 2.1), []).word == SLOWER
    noisy = verdict(steady, slower, (1.9, 2.1), ["cpu pressure 40.0%"])
    assert noisy.word == REFUSED and "cpu pressure" in noisy.why
    assert verdict(steady, slower, (1.9, 2.1), ["cpu pressure 40.0%"], allowed=True).word == SLOWER


def test_a_difference_under_min_effect_is_no_difference() -> None:
    """The verdict's floor: an interval excluding 1 calls a difference only when the ratio is
    at least min_effect away from 1, both ways and for either sense of better."""
    a = Summary(1.0, 0.999, 1.001, 16)
    near, far = Summary(1.005, 1.004, 1.006, 16), Summary(1.03, 1.029, 1.031, 16)
    tiny = verdict(a, near, (1.002, 1.008), [])
    assert tiny.word == SAME and "within 2% of 1" in tiny.why, tiny
    assert verdict(a, near, (1.002, 1.008), [], min_effect=0).word == SLOWER
    assert verdict(a, near, (1.002, 1.008), [], min_effect=0.004).word == SLOWER
    assert verdict(a, far, (1.02, 1.04), []).word == SLOWER
    assert verdict(far, a, (0.96, 0.98), []).word == FASTER
    assert verdict(near, a, (0.992, 0.998), []).word == SAME
    assert verdict(a, far, (1.02, 1.04), [], lower_is_better=False).word == FASTER
    assert verdict(a, near, (1.002, 1.008), [], lower_is_better=False).word == SAME


def linked_demo_libs(output: str) -> set[str]:
    return set(re.findall(r"(/\S+/store/[^/\s]+)/prefix/lib/libdemo_\w+\.so", output))


MAPS = "import demo; print(demo.build_type()); print(open('/proc/self/maps').read())"


def test_env_sh_never_mixes_two_artifacts(doit, cmd, project) -> None:
    """The trap: .orch/env.sh sourced (RelWithDebInfo active), PYTHONPATH at the Release
    artifact: the process must load the Release libraries only."""
    paths = built(doit, "demo", "relwithdebinfo", "release")
    assert doit("switch", "variant=relwithdebinfo").returncode == 0
    release_python = paths["release"] / "prefix" / "python"
    out = subprocess.run(["bash", "-c", f'. .orch/env.sh && PYTHONPATH={release_python} '
                                        f'python -c "{MAPS}"'],
                         cwd=project, capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0] == "Release", out[:300]
    assert linked_demo_libs(out) == {str(paths["release"])}, out
    # doit run: the same command in the Release artifact's own environment, no switch
    res = cmd("run", "variant=release", "--", "python", "-c", MAPS)
    assert res.returncode == 0, res.output
    assert res.stdout.splitlines()[0] == "Release"
    assert linked_demo_libs(res.stdout) == {str(paths["release"])}
    assert "relwithdebinfo" in (project / ".orch" / "profile").resolve().name  # not switched
    res = cmd("run", "variant=release", "--", "sh", "-c", "exit 3")
    assert res.returncode == 3
    # doit bench traces each side's first warm-up run: its own entry's libraries only
    # (the extension module and libdemo_core.so); a command loading the other's library fails
    res = cmd("bench", "variants=relwithdebinfo,release", "rounds=2", "allow_noisy=1",
              f"plot={project / 'p.svg'}", "format=json", "--", "python", "-c", "import demo")
    report = report_of(res)
    for side, variant in ((report.a, "relwithdebinfo"), (report.b, "release")):
        own = paths[variant].resolve()
        assert str(own / "prefix/lib/libdemo_core.so") in side.libraries, side
        assert all(lib.startswith(f"{own}/") for lib in side.libraries) and len(side.libraries) >= 2
    [core] = (paths["release"] / "prefix" / "lib").glob("libdemo_core.so*")
    res = cmd("bench", "variants=relwithdebinfo,release", "rounds=2", f"plot={project / 'p.svg'}",
              "--", "python", "-c", f"import ctypes; ctypes.CDLL({str(core)!r})")
    assert res.returncode == 1, res.output
    assert "the command in relwithdebinfo loaded another artifact's library" in res.output


@pytest.mark.parametrize("args, words", [
    (("recipe=benchkernel", "variants=release,nosuch"), "unknown variant 'nosuch'"),
    (("recipe=benchkernel", "variants=release"), "compare two artifacts"),
    (("recipe=benchkernel", "ids=abcdef0123,fedcba0123"), "no artifact"),
    (("recipe=benchkernel", "ids=abcdef0123,fedcba0123", "targets=c10"), "targets= and source="),
    (("recipe=benchkernel", "variants=release,twice", "rounds=1"), "rounds="),
    (("recipe=benchkernel", "variants=release,twice", "measure=cpu", "metric=x"), "metric="),
    (("recipe=benchkernel", "variants=release,twice", "min_effect=abc"), "min_effect="),
    (("recipe=benchkernel", "variants=release,twice", "min_effect=80"), "from 0 to 50"),
])
def test_bad_input_is_one_line_exit_2(cmd, args, words) -> None:
    res = cmd("bench", *args, "--", "true")
    assert res.returncode == 2, res.output
    errors = [line for line in res.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and words in errors[0] and "Traceback" not in res.output, res.output


def test_bad_input_of_run_and_a_missing_command(cmd) -> None:
    # (`doit run variant=X` without `--` is doit's own run command: the default task, build)
    for args in (("run", "variant=nosuch", "--", "true"), ("run", "variant=release", "--"),
                 ("bench", "variants=release,relwithdebinfo")):
        res = cmd(*args)
        assert res.returncode == 2, (args, res.output)
        assert len([ln for ln in res.output.splitlines() if ln.startswith("error:")]) == 1


def test_a_command_failing_in_one_variant_is_exit_1_naming_it(doit, cmd, tmp_path) -> None:
    built(doit, "benchkernel", "release", "twice")
    script = 'case "$ORCH_PROFILE" in *-twice) echo "the twice tail"; exit 7;; esac; true'
    res = cmd("bench", *KERNEL, "variants=release,twice", "rounds=2",
               f"plot={tmp_path / 'p.svg'}", "--", "sh", "-c", script)
    assert res.returncode == 1, res.output
    assert "the command failed in twice (exit 7)" in res.output
    assert "the twice tail" in res.output and "Traceback" not in res.output
