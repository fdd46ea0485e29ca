"""Identity rules: what changes an artifact id and what must not (issue 2, point 7)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import copy_project

from orchestrator.config.settings import Settings
from orchestrator.plan.derivation import make_plan
from orchestrator.store.artifacts import Store


def artifact_id(project: Path, store: Path, **variables: str) -> str:
    settings = Settings.from_vars(project, {"store": str(store), **variables})
    return make_plan(settings, Store(store)).artifact_id


@pytest.fixture
def base(project, tmp_path):
    store = tmp_path / "idstore"
    return project, store, artifact_id(project, store)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def edit_lock_entry(project: Path, key: str, field: str, value: str) -> None:
    path = project / "locks" / "toolchain.lock.json"
    data = json.loads(path.read_text())
    data["entries"][key][field] = value
    path.write_text(json.dumps(data, indent=2, sort_keys=True))


def test_same_inputs_same_id_at_another_path(base, tmp_path):
    project, store, first = base
    other = copy_project(tmp_path / "elsewhere" / "checkout")
    assert artifact_id(other, tmp_path / "other-store") == first


def test_source_change_changes_id(base):
    project, store, first = base
    edit(project / "recipes/demo/ops/add_kernel.cpp", "namespace native {", "namespace native {\n// x")
    assert artifact_id(project, store) != first


def test_variant_option_changes_id(base):
    project, store, first = base
    edit(project / "recipes/demo.toml", 'cflags = ["-gdwarf-4", ',
         'cflags = ["-fno-inline", "-gdwarf-4", ')
    assert artifact_id(project, store) != first


def test_variants_differ(base):
    project, store, first = base
    assert artifact_id(project, store, variant="release") != first


def test_recipe_field_changes_id(base):
    project, store, first = base
    edit(project / "recipes/demo.toml", 'system = "cmake"', 'system = "cmake"\ndefines = { DEMO_X = "1" }')
    assert artifact_id(project, store) != first


def test_used_lock_entry_changes_id(base):
    project, store, first = base
    edit_lock_entry(project, "pypi:cmake", "sha256", "0" * 64)
    assert artifact_id(project, store) != first


def test_unused_lock_entry_keeps_id(base):
    project, store, first = base
    edit_lock_entry(project, "deb:lldb-14", "sha256", "0" * 64)
    edit_lock_entry(project, "pypi:torch", "sha256", "1" * 64)
    assert artifact_id(project, store) == first


def reformat_toml(data: dict, prefix: str = "") -> str:
    """The same content written differently: comments, tables and keys in reverse order,
    every nested table spelled out as its own [section]."""
    scalars = {k: v for k, v in data.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    out = [f"\n# reformatted: [{prefix or 'top'}]"] if prefix else ["# reformatted by hand"]
    if prefix:
        out.append(f"[{prefix}]")
    for k, v in reversed(list(scalars.items())):
        out.append(f"{json.dumps(k)}   =   {json.dumps(v)}   # same value")
    for k, v in reversed(list(tables.items())):
        out.append(reformat_toml(v, f"{prefix}.{json.dumps(k)}" if prefix else json.dumps(k)))
    return "\n".join(out) + "\n"


def test_reformatted_recipe_keeps_id(base):
    import tomllib
    project, store, first = base
    path = project / "recipes/demo.toml"
    original = path.read_text()
    data = tomllib.loads(original)
    path.write_text(reformat_toml(data))
    assert tomllib.loads(path.read_text()) == data and path.read_text() != original
    assert artifact_id(project, store) == first


def test_parallelism_keeps_id(base, monkeypatch):
    project, store, first = base
    assert artifact_id(project, store, jobs="1") == first
    monkeypatch.setenv("MAX_JOBS", "7")
    assert artifact_id(project, store) == first


def test_source_identity_uses_stat_cache(base):
    """A no-op plan does not re-read unchanged files (the stat cache answers)."""
    project, store, first = base
    cache = json.loads((store / "cache" / "stat-cache.json").read_text())
    assert any(k.endswith("add_kernel.cpp") for k in cache)
    assert artifact_id(project, store) == first


def test_editing_one_variant_keeps_the_others(base):
    """Identity per variant: debug's cflags are not in release's or relwithdebinfo's id."""
    project, store, first = base
    release = artifact_id(project, store, variant="release")
    debug = artifact_id(project, store, variant="debug")
    edit(project / "recipes/demo.toml", 'cflags = ["-fno-omit-frame-pointer", ',
         'cflags = ["-Og", "-fno-omit-frame-pointer", ')
    assert artifact_id(project, store, variant="debug") != debug
    assert artifact_id(project, store, variant="release") == release
    assert artifact_id(project, store) == first


def test_adding_a_variant_keeps_the_others(base):
    project, store, first = base
    release = artifact_id(project, store, variant="release")
    path = project / "recipes/demo.toml"
    path.write_text(path.read_text() + '\n[variants.minsize]\nbuild_type = "MinSizeRel"\n')
    assert artifact_id(project, store, variant="release") == release
    assert artifact_id(project, store) == first


def test_description_changes_no_id(base):
    project, store, first = base
    ids = {v: artifact_id(project, store, variant=v) for v in ("release", "debug")}
    edit(project / "recipes/demo.toml", 'description = "PyTorch-shaped demo',
         'description = "a different description of the demo')
    assert artifact_id(project, store) == first
    assert {v: artifact_id(project, store, variant=v) for v in ids} == ids


def test_verify_rules_change_no_id(base):
    """Verify rules are out of the id: a changed rule re-verifies, it never rebuilds."""
    project, store, first = base
    edit(project / "recipes/demo.toml", "[verify]\n", '[verify]\nallowed_system_libs = ["libz.so.1"]\n')
    assert artifact_id(project, store) == first


def test_derivation_holds_only_this_variant(project, tmp_path):
    settings = Settings.from_vars(project, {"store": str(tmp_path / "s"), "variant": "release"})
    d = make_plan(settings, Store(tmp_path / "s")).derivation
    text = json.dumps(d)
    assert "relwithdebinfo" not in text and "debug" not in text and "PyTorch-shaped" not in text
    assert set(d["recipe"]) == {"name", "build", "source", "outputs"}
    assert d["variant"]["name"] == "release" and d["schema"] == 3
