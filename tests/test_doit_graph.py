"""The artifacts as doit tasks (cli.graph): `artifact:<recipe>:<variant>` per recipe variant,
whose uptodate is the store having the variant's artifact id, so doit's own commands (list
--all, info, -n) mean what they mean to doit users (issue 28)."""
from __future__ import annotations

import json


def test_artifact_tasks_are_listed_explained_run_in_parallel_and_then_up_to_date(doit) -> None:
    listed = doit("list", "--all")
    assert listed.returncode == 0, listed.output
    names = {line.split()[0] for line in listed.stdout.splitlines() if line.strip()}
    assert {"artifact:demo:release", "artifact:demo:debug", "artifact:demo:relwithdebinfo",
            "artifact:torchext:abi0", "build", "switch"} <= names, listed.stdout
    assert "artifact:demo:release" not in doit("list").stdout  # subtasks only with --all

    before = doit("info", "artifact:demo:release")
    assert "status     : run" in before.stdout, before.output  # (doit info exits 1 for "run")
    assert "artifact_present" in before.stdout and "'demo', 'release'" in before.stdout

    ran = doit("-n", "2", "artifact:demo:release", "artifact:demo:debug")
    assert ran.returncode == 0, ran.output
    assert "demo release" in ran.output and "demo debug" in ran.output

    for variant in ("release", "debug"):
        after = doit("info", f"artifact:demo:{variant}")
        assert "status     : up-to-date" in after.stdout, after.output
    again = doit("artifact:demo:release")
    assert again.returncode == 0 and "-- artifact:demo:release" in again.output, again.output

    # the same work as the verb: `doit build` finds the artifact the task made
    built = doit("build", "variant=release", "format=json")
    assert built.returncode == 0 and json.loads(built.stdout)["origin"] == "present", built.output


def test_the_group_alone_is_refused_before_anything_runs(doit) -> None:
    res = doit("artifact")
    assert res.returncode == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "doit artifact:<recipe>:<variant>" in lines[0], res.output


def test_a_recipe_that_does_not_read_is_left_out_of_the_listing(tmp_path) -> None:
    """Every doit command lists the tasks: a broken recipe must not break them (its own
    `doit build recipe=...` reports it), however deep its nesting."""
    from orchestrator.cli.graph import recipe_variants

    (tmp_path / "good.toml").write_text('[variants.release]\n[variants.debug]\n')
    (tmp_path / "deep.toml").write_text("x = " + "{a = " * 2000 + "1" + "}" * 2000 + "\n")
    (tmp_path / "bad.toml").write_text("[variants\n")
    (tmp_path / "latin1.toml").write_bytes(b"x = '\xff'\n")
    assert recipe_variants(tmp_path) == [("good", ["debug", "release"])]
