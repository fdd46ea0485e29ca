"""The realise pipeline as doit tasks (cli.graph): per recipe variant the toolchain, source,
build, verify and commit steps, with task_dep and an uptodate the store answers, and
`artifact:<recipe>:<variant>` over them, so doit's own commands (list --all, info, -n) mean
what they mean to doit users (issue 28)."""
from __future__ import annotations

import json
from pathlib import Path


def _staged(store) -> list[str]:
    tmp = store / "tmp"
    return sorted(p.name for p in tmp.glob("staged-*")) if tmp.is_dir() else []


def test_the_steps_are_tasks_listed_explained_run_in_order_and_in_parallel(doit, store) -> None:
    listed = doit("list", "--all")
    assert listed.returncode == 0, listed.output
    names = {line.split()[0] for line in listed.stdout.splitlines() if line.strip()}
    assert {"step-toolchain:toolchain", "step-source:demo", "step-build:demo:release",
            "step-verify:demo:release", "step-commit:demo:release", "artifact:demo:release",
            "artifact:demo:debug", "artifact:torchext:abi0", "build", "switch"} <= names, listed.stdout
    assert "artifact:demo:release" not in doit("list").stdout  # subtasks only with --all

    before = doit("info", "step-build:demo:release")
    assert "status     : run" in before.stdout, before.output  # (doit info exits 1 for "run")
    assert "step_done" in before.stdout and "'build', 'demo', 'release'" in before.stdout
    assert "step-toolchain:toolchain" in before.stdout and "step-source:demo" in before.stdout  # task_dep

    # one step (and the steps it needs): the output is staged, not an artifact yet
    built = doit("step-build:demo:release")
    assert built.returncode == 0, built.output
    staged = _staged(store)
    assert len(staged) == 2 and staged[0] + ".json" == staged[1], staged  # staged-<id>/ + its record
    assert "status     : up-to-date" in doit("info", "step-build:demo:release").stdout
    assert "status     : run" in doit("info", "step-verify:demo:release").stdout
    assert "status     : run" in doit("info", "artifact:demo:release").stdout
    assert not (store / "store").is_dir() or not list((store / "store").glob("*demo-release*"))
    planned_gc = doit("gc", "dry_run=1")  # what a stopped graph leaves, gc would take
    assert planned_gc.returncode == 0 and planned_gc.output.count("staged step output") == 2, planned_gc.output

    # the rest in parallel: release verifies and commits what was staged, debug runs every step
    ran = doit("-n", "2", "artifact:demo:release", "artifact:demo:debug")
    assert ran.returncode == 0, ran.output
    assert _staged(store) == [], _staged(store)  # committed: nothing left staged
    for variant in ("release", "debug"):
        for step in ("step-build", "step-verify", "step-commit", "artifact"):
            after = doit("info", f"{step}:demo:{variant}")
            assert "status     : up-to-date" in after.stdout, (step, variant, after.output)
    again = doit("artifact:demo:release")
    assert again.returncode == 0 and "-- artifact:demo:release" in again.output, again.output

    # the same work as the verb: `doit build` finds the artifact the steps made, verified
    built = doit("build", "variant=release", "format=json")
    assert built.returncode == 0 and json.loads(built.stdout)["origin"] == "present", built.output
    manifest = json.loads((Path(json.loads(built.stdout)["path"]) / "manifest.json").read_text())
    timings = manifest["timings"]
    assert manifest["verify"]["ok"] is True and set(timings) == {
        "build_s", "verify_s", "build_cpu_s", "build_peak_rss_mb", "tree_runs", "tree_build_s",
        "tree_cpu_s", "tree_peak_rss_mb"}, timings
    # what the build's processes used (the compiles ran: CPU), and this tree's one run
    assert timings["build_cpu_s"] > 0 and timings["build_peak_rss_mb"] > 1, timings
    assert timings["tree_runs"] == 1 and timings["tree_cpu_s"] == timings["build_cpu_s"], timings
    assert manifest["origin"]["kind"] == "built"


def test_the_group_alone_is_refused_before_anything_runs(doit) -> None:
    res = doit("artifact")
    assert res.returncode == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "doit artifact:<...>" in lines[0], res.output
    for group in ("step-build", "step-toolchain"):
        res = doit(group)
        assert res.returncode == 2 and f"doit {group}:<...>" in res.output, res.output


def test_a_recipe_that_does_not_read_is_left_out_of_the_listing(tmp_path) -> None:
    """Every doit command lists the tasks: a broken recipe must not break them (its own
    `doit build recipe=...` reports it), however deep its nesting."""
    from orchestrator.cli.graph import recipe_variants

    (tmp_path / "good.toml").write_text('[variants.release]\n[variants.debug]\n')
    (tmp_path / "deep.toml").write_text("x = " + "{a = " * 2000 + "1" + "}" * 2000 + "\n")
    (tmp_path / "bad.toml").write_text("[variants\n")
    (tmp_path / "latin1.toml").write_bytes(b"x = '\xff'\n")
    assert recipe_variants(tmp_path) == [("good", "toolchain", ["debug", "release"])]
