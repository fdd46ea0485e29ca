"""Command-line values read one way: every boolean variable through settings.parse_bool
(1/0/true/false/yes/no/on/off, anything else exit 2 naming the variable), and every artifact
id (id=, `doit why A B`) through orchestrator.plan.artifact_ref (all 40 hex digits, or a prefix of
at least 6 matching exactly one store entry)."""
from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.bot.runs import push_of
from orchestrator.config.cli_vars import BOOLEANS, VARS
from orchestrator.config.settings import Settings, parse_bool
from orchestrator.errors import UserError
from orchestrator.model.nightly import MatrixEntry, NightlyConfig
from orchestrator.plan.artifact_ref import find_stored, resolve_id
from orchestrator.store.artifacts import Store

REPO = Path(__file__).resolve().parents[1]
A = "abcdef0123" + "0" * 30
B = "abcdef9999" + "1" * 30


def settings(tmp_path: Path, **variables: str) -> Settings:
    return Settings.from_vars(REPO, {"store": str(tmp_path), **variables})


@pytest.mark.parametrize("word", ["1", "true", "True", "YES", "on", " 1 "])
def test_true_spellings(word: str) -> None:
    assert parse_bool("push", word) is True


@pytest.mark.parametrize("word", ["0", "false", "FALSE", "no", "off"])
def test_false_spellings(word: str) -> None:
    assert parse_bool("all", word) is False


@pytest.mark.parametrize("word", ["maybe", "", "2", "y", "truee"])
def test_anything_else_is_bad_input_naming_the_variable(word: str) -> None:
    with pytest.raises(UserError, match=r"^variable push=.* is not a boolean"):
        parse_bool("push", word)


def test_every_boolean_variable_is_checked_up_front(tmp_path: Path) -> None:
    assert {"push", "all", "dry_run", "toolchain", "create", "substitute"} <= BOOLEANS
    for name in sorted(BOOLEANS):
        assert VARS[name].type == "bool"
        with pytest.raises(UserError, match=rf"variable {name}='maybe' is not a boolean"):
            settings(tmp_path, **{name: "maybe"})


def test_false_means_false(tmp_path: Path) -> None:
    s = settings(tmp_path, push="false", all="false", dry_run="off")
    assert (s.flag("push", True), s.flag("all"), s.flag("dry_run")) == (False, False, False)
    assert settings(tmp_path, all="yes").flag("all") is True
    assert settings(tmp_path).flag("all") is False and settings(tmp_path).flag("push", True)
    config = NightlyConfig(matrix=[MatrixEntry(recipe="demo", variants=["release"])], push=True)
    assert push_of(settings(tmp_path, push="false"), config) is False
    assert push_of(settings(tmp_path), config) is True


@pytest.fixture
def store(tmp_path: Path) -> Store:
    for artifact_id in (A, B):
        d = tmp_path / "store" / f"{artifact_id}-demo-release"
        d.mkdir(parents=True)
        (d / "manifest.json").write_text("{}")
    return Store(tmp_path)


def test_id_rule(store: Store) -> None:
    assert resolve_id(store, A[:12]) == (A, store.store_dir / f"{A}-demo-release")
    assert resolve_id(store, A[:7].upper())[0] == A
    assert find_stored(store, B) == store.store_dir / f"{B}-demo-release"
    missing = "f" * 40
    assert resolve_id(store, missing) == (missing, None)  # pull may name one not stored
    with pytest.raises(UserError, match=r"^id=abcdef: 2 artifacts in .* match"):
        resolve_id(store, "abcdef")
    with pytest.raises(UserError, match=r"^id=fffffff: no artifact in .* match"):
        resolve_id(store, "fffffff")
    for bad in ("abcde", "xyz123", A + "0", "abc def"):
        with pytest.raises(UserError, match="40 lowercase hex"):
            resolve_id(store, bad)
    with pytest.raises(UserError, match=rf"^why: {missing}: not in "):
        find_stored(store, missing, label="why: ")


def test_push_all_false_pushes_the_one_named(tmp_path: Path, store: Store) -> None:
    from orchestrator.verbs.push import chosen_artifacts

    chosen = chosen_artifacts(settings(tmp_path, all="false", id=A[:8]), store)
    assert chosen == [store.store_dir / f"{A}-demo-release"]
