"""A materialized toolchain pushed to a signed file:// cache and pulled into another store:
used without building (relocated to the new path, re-hashed), and refused with one warning
line, nothing left behind, when its signature, a blob or a path is wrong.

The toolchain here is a small stand-in with the real one's shape (venv scripts naming the
root, pyvenv.cfg, the interpreter link, toolchain.json): the real one (20k files, 0.9 GB)
is measured by benchmarks/time_to_breakpoint.py instead.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "oci"))
from registry_fixtures import registry  # noqa: E402,F401  (fixture)
from registry_server import RegistryServer  # noqa: E402

from orchestrator.cache.cache_toml import load_config
from orchestrator.cache.errors import CacheError
from orchestrator.cache.signing import SecretKey
from orchestrator.cache.toolchain_pull import substitute_toolchain
from orchestrator.cache.toolchain_push import push_toolchain
from orchestrator.cache.toolchain_record import toolchain_record_key
from orchestrator.hashing import pretty_json
from orchestrator.lock.files import load_lock
from orchestrator.store import tree_manifest
from orchestrator.store.artifacts import Store
from orchestrator.toolchain import materialize as tc

REPO = Path(__file__).resolve().parents[1]


def fake_toolchain(store: Store, lock) -> Path:  # noqa: ANN001
    """A toolchain as ensure_toolchain leaves it, in miniature."""
    root = store.toolchains_dir / tc.toolchain_hash(lock)
    (root / "venv" / "bin").mkdir(parents=True)
    (root / "venv" / "pyvenv.cfg").write_text(
        f"home = /usr/bin\ncommand = /usr/bin/python3 -m venv {root}/venv\n")
    script = root / "venv" / "bin" / "tool"
    script.write_text(f"#!{root}/venv/bin/python\nprint('tool')\n")
    script.chmod(0o755)
    os.symlink(lock.entries["python"].path, root / "venv" / "bin" / "python3")
    os.symlink("python3", root / "venv" / "bin" / "python")
    (root / "debs" / "root").mkdir(parents=True)
    (root / "debs" / "root" / "big.so").write_bytes(os.urandom(3 << 20))
    (root / tc.TOOLCHAIN_JSON).write_text(pretty_json({"lock": lock.name,
                                                       "lock_digest": lock.digest()}))
    tree_manifest.write(root, tc.FILES_MANIFEST)
    return root


def _team(tmp_path, monkeypatch, url: str | None = None):  # noqa: ANN001, ANN202
    key = SecretKey.generate("team-1")
    cache = tmp_path / "cache"
    cache.mkdir()
    cfg = tmp_path / "cache.toml"
    cfg.write_text(f'[cache]\nsubstituters = ["{url or f"file://{cache}"}"]\n'
                   f'trusted-keys = ["{key.public.line()}"]\njobs = 2\n')
    monkeypatch.setenv("ORCH_CACHE_CONFIG", str(cfg))
    monkeypatch.setenv("ORCH_NO_PROGRESS", "1")
    lock = load_lock(REPO / "locks", "toolchain")
    store_a = Store(tmp_path / "a").ensure()
    root_a = fake_toolchain(store_a, lock)
    push_toolchain(root_a, lock, load_config(REPO), key)
    store_b = Store(tmp_path / "elsewhere" / "b").ensure()
    return {"key": key, "cache": cache, "cfg": cfg, "lock": lock, "a": root_a, "b": store_b,
            "url": url or "file://"}


@pytest.fixture
def team(tmp_path, monkeypatch):
    return _team(tmp_path, monkeypatch)


@pytest.fixture
def oci_team(tmp_path, monkeypatch, registry: RegistryServer):  # noqa: F811
    """The same, pushed to a real OCI registry (docker-registry) instead."""
    return _team(tmp_path, monkeypatch, registry.url("team/toolchains"))


def no_build(monkeypatch) -> list[str]:  # noqa: ANN001
    """Building the toolchain locally records a call instead of running pip / apt-get."""
    calls: list[str] = []

    def fake_debs(tmp: Path, lock) -> None:  # noqa: ANN001
        calls.append("debs")

    def fake_pypi(tmp: Path, lock, py: str) -> None:  # noqa: ANN001
        calls.append("pypi")
        (tmp / "venv" / "bin").mkdir(parents=True)

    monkeypatch.setattr(tc, "_install_debs", fake_debs)
    monkeypatch.setattr(tc, "_install_pypi", fake_pypi)
    monkeypatch.setattr(tc, "probe_torch", lambda py: None)
    return calls


def substituter(store: Store, lock, final: Path):  # noqa: ANN001, ANN201
    return substitute_toolchain(REPO, store, lock, final)


def leftovers(store: Store) -> list[str]:
    return sorted(p.name for p in store.toolchains_dir.iterdir() if ".tmp-" in p.name)


def test_pulled_toolchain_is_used_without_building(team, monkeypatch, capsys):
    calls = no_build(monkeypatch)
    store: Store = team["b"]
    got = tc.ensure_toolchain(store, team["lock"], substituter)
    assert calls == []
    root = got.root
    assert root == store.toolchains_dir / team["a"].name and root.is_dir()
    assert f"substituted from {team['url']}" in capsys.readouterr().err
    assert (root / "venv" / "bin" / "tool").read_text().startswith(f"#!{root}/venv/bin/python\n")
    assert f"venv {root}/venv" in (root / "venv" / "pyvenv.cfg").read_text()
    assert str(team["a"]) not in (root / "venv" / "bin" / "tool").read_text()
    assert os.access(root / "venv" / "bin" / "tool", os.X_OK)
    assert os.readlink(root / "venv" / "bin" / "python3") == team["lock"].entries["python"].path
    tc.check_toolchain(root, full=True)  # the manifest it wrote holds the relocated hashes
    assert tc.ensure_toolchain(store, team["lock"], substituter).root == root  # now present
    assert leftovers(store) == []


def test_toolchain_pulled_from_an_oci_registry(oci_team, monkeypatch, capsys):
    test_pulled_toolchain_is_used_without_building(oci_team, monkeypatch, capsys)


@pytest.mark.parametrize("damage", ["untrusted", "signature", "blob", "path", "binary"])
def test_bad_toolchain_record_is_refused_and_built_here(team, monkeypatch, capsys, damage):
    calls = no_build(monkeypatch)
    rec_path = team["cache"] / toolchain_record_key(team["a"].name)
    doc = json.loads(rec_path.read_text())
    if damage == "untrusted":
        team["cfg"].write_text(team["cfg"].read_text().replace(
            team["key"].public.line(), SecretKey.generate("team-1").public.line()))
    elif damage == "signature":
        doc["root"] = "/somewhere/else"
    elif damage == "blob":
        big = next(f for f in doc["files"] if f["path"] == "debs/root/big.so")
        blob = team["cache"] / "cas" / big["sha256"]
        other = next(f for f in doc["files"] if f["path"] == tc.TOOLCHAIN_JSON)
        blob.write_bytes((team["cache"] / "cas" / other["sha256"]).read_bytes())
    else:
        target = doc["files"][0]
        if damage == "path":
            target["path"] = "../../escaped"
        else:
            doc["relocate"].append("debs/root/big.so")
        key: SecretKey = team["key"]
        doc.pop("signature")
        doc["signature"] = key.sign(doc)
    rec_path.write_text(json.dumps(doc))
    store: Store = team["b"]
    got = tc.ensure_toolchain(store, team["lock"], substituter)
    assert calls == ["debs", "pypi"]  # built from the lock instead
    err = capsys.readouterr().err
    warnings = [ln for ln in err.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "materializing the toolchain from the lock" in warnings[0], err
    assert "Traceback" not in err
    assert got.root.is_dir() and not (got.root / "venv" / "bin" / "tool").exists()
    assert leftovers(store) == []
    assert not (store.root.parent / "escaped").exists()


def test_substitute_off_and_no_record(team, monkeypatch, capsys):
    calls = no_build(monkeypatch)
    (team["cache"] / toolchain_record_key(team["a"].name)).unlink()
    assert substitute_toolchain(REPO, team["b"], team["lock"],
                                team["b"].toolchains_dir / team["a"].name) is None
    tc.ensure_toolchain(team["b"], team["lock"], None)
    assert calls == ["debs", "pypi"]
    assert "warning" not in capsys.readouterr().err


def test_binary_holding_its_path_is_not_pushed(tmp_path, monkeypatch):
    (tmp_path / "none.toml").write_text("[cache]\n")
    monkeypatch.setenv("ORCH_CACHE_CONFIG", str(tmp_path / "none.toml"))
    lock = load_lock(REPO / "locks", "toolchain")
    store = Store(tmp_path / "a").ensure()
    root = fake_toolchain(store, lock)
    (root / "debs" / "root" / "rpath.so").write_bytes(b"\x7fELF\0\0" + str(root).encode())
    tree_manifest.write(root, tc.FILES_MANIFEST)
    (tmp_path / "cache").mkdir()
    with pytest.raises(CacheError, match="inside binary data"):
        push_toolchain(root, lock, load_config(REPO), SecretKey.generate("k"),
                       url=f"file://{tmp_path}/cache")
