"""fs: the one temp naming, and every writer leaves nothing that clean_stale would not know."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from orchestrator.fs import (
    TEMP_RE,
    atomic_symlink,
    atomic_writer,
    is_stale_temp,
    temp_in,
    temp_owner,
    temp_sibling,
    write_atomic,
)
from orchestrator.hashing import StatCache, pretty_json
from orchestrator.store.artifacts import Store
from orchestrator.workspace.links import apply_links
from orchestrator.workspace.profiles import Workspace

DEAD = 999999999


def test_temp_names_parse_back_to_this_process(tmp_path: Path) -> None:
    for p in (temp_in(tmp_path, "x"), temp_sibling(tmp_path / "env.sh")):
        assert TEMP_RE.search(p.name) and temp_owner(p.name) == os.getpid()
        assert not is_stale_temp(p.name)
    assert temp_sibling(tmp_path / "env.sh").name.startswith(".env.sh.tmp-")
    assert temp_owner("env.sh") is None and not is_stale_temp(f"x.tmp-{DEAD}")
    assert is_stale_temp(f".x.tmp-{DEAD}-00ff")


def test_writers_leave_no_temp(tmp_path: Path) -> None:
    write_atomic(tmp_path / "a" / "f", "text", mode=0o444)
    assert (tmp_path / "a" / "f").read_text() == "text"
    assert oct((tmp_path / "a" / "f").stat().st_mode & 0o777) == "0o444"
    with pytest.raises(RuntimeError):
        with atomic_writer(tmp_path / "a" / "g") as f:
            f.write(b"half")
            raise RuntimeError
    atomic_symlink("f", tmp_path / "a" / "l")
    atomic_symlink("g", tmp_path / "a" / "l")
    assert os.readlink(tmp_path / "a" / "l") == "g"
    cache = StatCache(tmp_path / "a" / "stat.json")
    cache.sha256(tmp_path / "a" / "f")
    cache.save()
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["f", "l", "stat.json"]


def test_store_clean_stale_knows_every_temp_place(tmp_path: Path) -> None:
    store = Store(tmp_path / "s").ensure()
    dead = [store.tmp_dir / f"build.tmp-{DEAD}-ab", store.toolchains_dir / f"t.tmp-{DEAD}-ab",
            store.root / "cache" / f".stat-cache.json.tmp-{DEAD}-ab",
            store.root / "git" / f"0123.git.tmp-{DEAD}-ab",
            store.build_dir / "0123-x" / f".source.tmp-{DEAD}-ab",
            store.gcroots_dir / f".0123.tmp-{DEAD}-ab"]
    for p in dead:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.mkdir()
    live = store.new_temp("mine")
    assert sorted(store.clean_stale()) == sorted(dead)
    assert live.is_dir() and not any(p.exists() for p in dead)


def test_apply_links_removes_a_killed_switch_temp(tmp_path: Path) -> None:
    root, artifact = tmp_path / "ws", tmp_path / "art"
    (root / "torch" / "lib").mkdir(parents=True)
    (artifact / "meta").mkdir(parents=True)
    (artifact / "meta" / "workspace-links.json").write_text(
        '{"links": {"torch/lib/libc10.so": "prefix/lib/libc10.so"}}')
    stale = root / "torch" / "lib" / f".libc10.so.tmp-{DEAD}-0a1b"
    stale.symlink_to("nowhere")
    assert apply_links(root, root / ".orch", artifact) == ["torch/lib/libc10.so"]
    assert sorted(p.name for p in (root / "torch" / "lib").iterdir()) == ["libc10.so"]


def test_workspace_clean_stale_takes_orch_and_compile_commands_temps(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    ws.orch.mkdir()
    dead = [ws.orch / f".profile.tmp-{DEAD}-ab", tmp_path / f".compile_commands.json.tmp-{DEAD}-ab"]
    for p in dead:
        p.symlink_to("nowhere")
    users = tmp_path / f".notes.tmp-{DEAD}-ab"  # the user's own file in the checkout: kept
    users.write_text("")
    assert sorted(ws.clean_stale()) == sorted(dead)
    assert users.exists()


@pytest.mark.parametrize("value", [
    {"b": [{"z": 1, "a": "é"}, {"k": [1, {"x": None}]}], "a": {"d": {"e": [1.5, True]}}, "c": []},
    [], {}, 0, "x", [[1, 2], {"y": {}}], {"files": [], "n": {"files": [{"p": "a\nb"}]}},
])
def test_pretty_json_with_flat_items_is_the_same_value_and_layout_above(value) -> None:
    """The same JSON value, sorted; dicts indented as json's indent=2 does, and the items
    of lists at least `flat_items` deep one line each (nothing deeper folds)."""
    assert pretty_json(value, flat_items=99) == json.dumps(value, sort_keys=True, indent=2,
                                                           ensure_ascii=False) + "\n"
    text = pretty_json(value, flat_items=1)
    assert json.loads(text) == value and text.endswith("\n")
    if isinstance(value, dict) and value.get("b"):
        assert '\n    {"a": "é", "z": 1},\n    {"k": [1, {"x": null}]}\n  ],' in text
        assert '"d": {\n      "e": [\n        1.5,\n        true\n      ]\n    }' in text
