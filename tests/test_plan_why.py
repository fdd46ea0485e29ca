"""`doit plan` (id, derivation, lock entries, what build would do) and `doit why` (two stored
ids, or two variable sets planned without building), on real demo builds and a real file://
substituter filled by `doit push`."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from conftest import make_store

from orchestrator.realise.explain import Change, derivation_diff


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def cache_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCH_CACHE_")}
    env.update(ORCH_CACHE_CONFIG=str(tmp_path / "cache.toml"), ORCH_NO_PROGRESS="1",
               ORCH_CACHE_KEY_DIR=str(tmp_path / "keys"), **extra)
    return env


def test_plan_says_build_then_present(doit, store, tmp_path):
    fresh = tmp_path / "fresh-store"
    before = doit("plan", f"store={fresh}", "format=json")
    assert before.returncode == 0, before.output
    p = last_json(before.stdout)
    assert p["action"] == "build" and p["path"] is None
    assert set(p["inputs"]) == {"python", "compiler:cc", "compiler:cxx", "pypi:cmake", "pypi:ninja"}
    assert p["derivation"]["variant"]["name"] == "relwithdebinfo"
    # planning materializes nothing: no toolchain, no build tree, no artifact
    assert not (fresh / "toolchains").exists() and not (fresh / "build").exists()
    assert not (fresh / "store").exists() or not list((fresh / "store").iterdir())

    built = doit("build", "format=json")
    assert built.returncode == 0, built.output
    assert last_json(built.stdout)["id"] == p["id"]       # same id in another store
    after = doit("plan")
    assert after.returncode == 0, after.output
    assert f"demo relwithdebinfo {p['id']}" in after.output
    assert "build would: present" in after.output and "pypi:cmake" in after.output
    assert '"builder"' not in after.output and "derivation=1" in after.output  # a short summary
    full = doit("plan", "derivation=1")
    assert '"derivation"' not in full.output and '"builder": "cmake"' in full.output


def test_plan_names_the_substituter(doit, store, tmp_path, session_toolchain):
    keys = doit("cache-keygen", "name=team-1", env=cache_env(tmp_path))
    assert keys.returncode == 0, keys.output
    public = keys.stdout.strip().splitlines()[-1]
    cache_url = (tmp_path / "cache").as_uri() + "/"
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache.toml").write_text(
        f"[cache]\nsubstituters = {json.dumps([cache_url])}\ntrusted-keys = {json.dumps([public])}\n")
    env = cache_env(tmp_path, ORCH_CACHE_SIGNING_KEY=str(tmp_path / "keys" / "team-1.secret"))
    assert doit("build", env=env).returncode == 0
    pushed = doit("push", env=env)
    assert pushed.returncode == 0, pushed.output

    teammate = make_store(tmp_path / "teammate", session_toolchain)
    res = doit("plan", f"store={teammate}", "format=json", env=env)
    assert res.returncode == 0, res.output
    p = last_json(res.stdout)
    assert p["action"] == "substitutable" and p["substituter"] == cache_url
    assert not (teammate / "store").exists() or not list((teammate / "store").iterdir())
    off = doit("plan", f"store={teammate}", "substitute=0", env=env)
    assert "build would: build" in off.output


def test_why_shows_the_changed_flag(project, doit, store):
    first = doit("build", "variant=debug", "format=json")
    assert first.returncode == 0, first.output
    recipe = project / "recipes/demo.toml"
    text = recipe.read_text()
    old = 'cflags = ["-fno-omit-frame-pointer", "-gdwarf-4"]'
    assert old in text
    recipe.write_text(text.replace(old, 'cflags = ["-fno-omit-frame-pointer", "-gdwarf-4", "-Og"]'))
    # -Og fails the debug variant's -O0 rule: commit it anyway, it is only compared here
    second = doit("build", "variant=debug", "commit_failed=1", "format=json")
    assert second.returncode == 0, second.output
    a, b = last_json(first.stdout)["id"], last_json(second.stdout)["id"]
    assert a != b
    res = doit("why", a[:8], b[:10])
    assert res.returncode == 0, res.output
    assert "variant.cflags: + -Og" in res.output
    as_json = doit("why", a, b, "format=json")
    data = last_json(as_json.stdout)
    assert data["changes"] == [{"path": "variant.cflags", "op": "+", "old": None, "new": "-Og"}]
    same = doit("why", a, a)
    assert same.returncode == 0 and "same derivation" in same.output


def test_why_bad_input_is_one_line(doit, store):
    for args in (["why", "0d6e24"], ["why", "xyz", "abcdef12"], ["why", "abcdef12", "abcdef34"],
                 ["why", "abc", "abcdef12"]):
        res = doit(*args)
        assert res.returncode == 2, (args, res.output)
        assert "Traceback" not in res.output and "error: why:" in res.output


def test_derivation_diff_paths():
    a = {"variant": {"cflags": ["-g"], "build_type": "Debug"}, "inputs": {"x": "1"}}
    b = {"variant": {"cflags": ["-g", "-Og"], "build_type": "Release"}, "inputs": {"y": "2"}}
    lines = [c.line() for c in derivation_diff(a, b)]
    assert lines == ["inputs.x: - 1", "inputs.y: + 2", "variant.build_type: Debug → Release",
                     "variant.cflags: + -Og"]
    assert derivation_diff({"l": [1, 2]}, {"l": [2, 1]}) == [Change("l", "~", old=[1, 2], new=[2, 1])]
    assert derivation_diff(a, a) == []


def test_why_two_variable_sets_plans_both_and_builds_nothing(doit, tmp_path):
    fresh = tmp_path / "fresh-store"
    res = doit("why", "variant=release", "variant2=debug", f"store={fresh}")
    assert res.returncode == 0, res.output
    assert "variant.build_type: Release → Debug" in res.output
    assert "variant.cflags: + -fno-omit-frame-pointer" in res.output
    assert not (fresh / "toolchains").exists() and not (fresh / "build").exists()
    assert not (fresh / "store").exists() or not list((fresh / "store").iterdir())

    data = last_json(doit("why", "variant=release", "variant2=debug", f"store={fresh}",
                          "format=json").stdout)
    plans = [last_json(doit("plan", f"variant={v}", f"store={fresh}", "format=json").stdout)
             for v in ("release", "debug")]
    assert (data["a"], data["b"]) == (plans[0]["id"], plans[1]["id"])
    assert data["sides"] == "planned"
    assert {"path": "variant.build_type", "op": "~", "old": "Release", "new": "Debug"} in data["changes"]
    # the second side defaults to the first: only targets differ
    only = last_json(doit("why", "targets2=demo_core", f"store={fresh}", "format=json").stdout)
    assert only["changes"] == [{"path": "variant.targets", "op": "+", "old": None,
                                "new": "demo_core"}]
    same = doit("why", "variant=debug", "variant2=debug", f"store={fresh}")
    assert same.returncode == 0 and "same derivation" in same.output


def test_why_two_checkouts_differ_in_the_source(doit, project, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d, extra in ((a, ""), (b, "// another line\n")):
        shutil.copytree(project / "recipes" / "demo", d)
        (d / "core" / "core.cpp").write_text((d / "core" / "core.cpp").read_text() + extra)
    res = doit("why", f"source={a}", f"source2={b}", "format=json")
    assert res.returncode == 0, res.output
    assert [c["path"] for c in last_json(res.stdout)["changes"]] == ["source.tree_sha256"]


def test_why_bad_variable_sets_are_one_line(doit, store, tmp_path):
    cases = [(["variant2=nosuch"], "the second side"), (["recipe2=nosuch"], "the second side"),
             (["variant=nosuch", "variant2=debug"], "the first side"),
             (["variant=release"], "variant2="), (["abcdef12", "variant2=debug"], "not both"),
             (["abcdef12", "abcdef34", "variant=debug"], "not both"),
             ([f"source2={tmp_path / 'missing'}"], "source2="), (["variantt2=debug"], "variant2=")]
    for args, says in cases:
        res = doit("why", *args)
        assert res.returncode == 2, (args, res.output)
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in res.output and says in lines[0], (args, lines)
    assert not (store / "store").exists() or not list((store / "store").iterdir())
