"""`doit rollback` goes back to the previous *different* artifact and names the generations it
skipped; `doit switch -` returns to what was active before (issue 35). Real demo builds."""
from __future__ import annotations

import json
import os

from test_build_switch import in_env


def active_type(ws) -> str:  # noqa: ANN001
    return in_env(ws, "import demo; print(demo.build_type())")


def test_rollback_skips_generations_of_the_same_artifact(doit, store, tmp_path):  # noqa: ANN001
    ws = tmp_path / "ws"
    ws.mkdir()
    w = f"workspace={ws}"
    assert doit("switch", w).returncode == 0                          # gen 1: RelWithDebInfo
    assert doit("switch", w, "variant=release").returncode == 0       # gen 2: Release
    assert doit("rollback", w).returncode == 0                        # active: gen 1
    assert doit("switch", w, "variant=release").returncode == 0       # gen 3: Release again
    assert active_type(ws) == "Release"
    res = doit("rollback", w)
    assert res.returncode == 0, res.output
    assert active_type(ws) == "RelWithDebInfo", res.output
    assert "generation 1" in res.stderr
    assert "skipped generation 2: the same artifact as the active one" in res.stderr, res.stderr
    # Nothing before generation 1 differs: exit 2, one line, the profile unchanged.
    res = doit("rollback", w)
    assert res.returncode == 2 and "no generation before 1 holds a different artifact" in res.stderr
    assert os.readlink(ws / ".orch/profile") == "profile-1-link"


def test_switch_dash_returns_to_what_was_active_before(doit, store, tmp_path):  # noqa: ANN001
    ws = tmp_path / "ws"
    ws.mkdir()
    w = f"workspace={ws}"
    res = doit("switch", "-", w)
    assert res.returncode == 2 and "no earlier active generation" in res.stderr, res.output
    assert doit("switch", w).returncode == 0
    assert doit("switch", w, "variant=release").returncode == 0
    res = doit("switch", "-", w, "format=json")
    assert res.returncode == 0, res.output
    assert json.loads(res.stdout)["generation"] == 1
    assert active_type(ws) == "RelWithDebInfo"
    res = doit("switch", "-", w)                                      # and back again, like `cd -`
    assert res.returncode == 0 and "switched back" in res.stderr, res.output
    assert active_type(ws) == "Release"
    assert doit("rollback", w).returncode == 0                        # a rollback is a change too
    assert doit("switch", "-", w).returncode == 0
    assert active_type(ws) == "Release"
    res = doit("switch", "-", w, "variant=debug")
    assert res.returncode == 2 and "does not take variant=" in res.stderr, res.output
    res = doit("switch", "back", w)
    assert res.returncode == 2 and "takes no word but `-`" in res.stderr, res.output
