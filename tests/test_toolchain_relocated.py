"""A real toolchain (the session's: venv, locked wheels, lldb-14 debs, ~20k files) pushed to
a signed file:// cache and substituted into another store: relocated to that store's path,
re-hashed, and used for a real cmake/ninja/gcc build of the demo there, which gives the same
artifact id as the pushing store's and verifies (ELF closure, symbols, C++ ABI, DWARF).
tests/test_toolchain_substitute.py covers refusals on a small stand-in."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, make_store


def doit(env: dict[str, str], *args: str, timeout: float = 1500) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def test_a_real_toolchain_relocated_by_substitution_builds(tmp_path: Path,
                                                           session_toolchain: Path) -> None:
    keys, cache = tmp_path / "keys", tmp_path / "cache"
    cache.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCH_")}
    env.update(ORCH_CACHE_KEY_DIR=str(keys), ORCH_NO_PROGRESS="1")
    made = doit(env, "cache-keygen", "name=reloc-1")
    assert made.returncode == 0, made.stderr
    public = made.stdout.strip().splitlines()[-1]
    config = tmp_path / "cache.toml"
    config.write_text(f"[cache]\nsubstituters = [{json.dumps(cache.as_uri())}]\n"
                      f"push = {json.dumps(cache.as_uri())}\n"
                      f"trusted-keys = [{json.dumps(public)}]\njobs = 2\ntimeout = 30\n")
    env["ORCH_CACHE_CONFIG"] = str(config)
    store_a = make_store(tmp_path / "A", session_toolchain)
    pushed = doit({**env, "ORCH_CACHE_SIGNING_KEY": str(keys / "reloc-1.secret")},
                  "push", "toolchain=1", f"store={store_a}")
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    store_b = tmp_path / "B"
    store_b.mkdir()
    built = doit(env, "build", "variant=release", f"store={store_b}", "format=json")
    assert built.returncode == 0, built.stdout + built.stderr
    [tc] = list((store_b / "toolchains").iterdir())
    assert tc.name == session_toolchain.name and tc.is_dir() and not tc.is_symlink()
    cfg = (tc / "venv" / "pyvenv.cfg").read_text()
    assert str(tc) in cfg and str(session_toolchain.resolve()) not in cfg  # relocated
    pip = (tc / "venv" / "bin" / "pip").read_text()  # (a long path: pip's /bin/sh exec form)
    assert f"{tc}/venv/bin/python" in pip and str(session_toolchain.resolve()) not in pip, pip
    new = json.loads(built.stdout.strip().splitlines()[-1])
    assert new["origin"] == "built"
    here = doit(env, "build", "variant=release", f"store={store_a}", "substitute=0",
                "format=json")
    assert here.returncode == 0, here.stderr
    assert json.loads(here.stdout.strip().splitlines()[-1])["id"] == new["id"]
    verified = doit(env, "verify", "variant=release", f"store={store_b}")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    ran = subprocess.run([str(tc / "venv" / "bin" / "python"), "-c", "import sys; print(sys.prefix)"],
                         capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stdout.strip() == str(tc / "venv"), ran.stdout + ran.stderr
