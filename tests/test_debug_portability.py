"""Portable source maps: an artifact built in checkout A and pulled from a file:// cache into
the store of checkout B (another path) debugs against B's sources, with A deleted."""
from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

from conftest import copy_project, make_store, run_doit
from dap_client import stop_at_line, stop_in_function
from test_debug_dap import FUNCTION, LLDB_CONFIG, function_span, launch_config, line_of

SCRIPT = "import demo\nprint(demo.add([4.0], [1.0], alpha=0.75))\n"


def remove_tree(path: Path) -> None:
    for dirpath, dirnames, _ in os.walk(path):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o755)
    shutil.rmtree(path)


def test_artifact_from_another_checkout_binds_to_this_checkout(tmp_path: Path,
                                                               session_toolchain: Path) -> None:
    keys = tmp_path / "keys"
    config = tmp_path / "cache.toml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCH_CACHE_")}
    env.update(ORCH_CACHE_CONFIG=str(config), ORCH_CACHE_KEY_DIR=str(keys), ORCH_NO_PROGRESS="1")

    a = copy_project(tmp_path / "alice" / "src" / "orch")
    store_a = make_store(tmp_path / "alice" / "store", session_toolchain)
    keygen = run_doit(a, "cache-keygen", "name=team", env=env)
    assert keygen.returncode == 0, keygen.output
    public = keygen.stdout.strip().splitlines()[-1]
    cache = tmp_path / "team-cache"
    cache.mkdir()
    config.write_text(f'[cache]\nsubstituters = ["file://{cache}"]\n'
                      f"trusted-keys = {json.dumps([public])}\n")
    built = run_doit(a, "build", "variant=relwithdebinfo", "substitute=0", "format=json",
                     f"store={store_a}", env=env)
    assert built.returncode == 0, built.output
    built_id = json.loads(built.stdout.strip().splitlines()[-1])["id"]
    pushed = run_doit(a, "push", "variant=relwithdebinfo", f"store={store_a}",
                      env={**env, "ORCH_CACHE_SIGNING_KEY": str(keys / "team.secret")})
    assert pushed.returncode == 0, pushed.output
    remove_tree(tmp_path / "alice")   # nothing of checkout A is left to find

    b = copy_project(tmp_path / "bob" / "work" / "checkout-two")
    store_b = make_store(tmp_path / "bob" / "store", session_toolchain)
    sw = run_doit(b, "switch", "variant=relwithdebinfo", "format=json", f"store={store_b}",
                  env=env)
    assert sw.returncode == 0, sw.output
    info = json.loads(sw.stdout.strip().splitlines()[-1])
    assert info["id"] == built_id and info["origin"].startswith("substituted"), info
    assert not list((store_b / "build").glob("demo-*"))   # no build tree: nothing compiled in B
    assert run_doit(b, "vscode", f"store={store_b}", env=env).returncode == 0

    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    stop = stop_in_function(launch_config(b, LLDB_CONFIG, script), FUNCTION)
    top = stop.frames[0]
    source = b / "recipes/demo/ops/add_kernel.cpp"
    assert top["source"].get("path") == str(source), top
    assert top["line"] in function_span(source, "Tensor add_kernel("), top
    assert stop.variables.get("alpha") == "0.75", stop.variables
    # A breakpoint set in B's editor (local path) binds to the right line too.
    line = line_of(source, "result[i] = self.data()[i]")
    config = launch_config(b, LLDB_CONFIG, script)
    at_line = stop_at_line([config["debugAdapterExecutable"]], config, source, line)
    assert (at_line.frames[0]["source"].get("path"), at_line.frames[0]["line"]) == \
        (str(source), line), at_line.frames[0]
    # The artifact itself is read-only and names neither checkout.
    ops = b / ".orch/profile/prefix/lib/libdemo_ops.so"
    assert not stat.S_IMODE(ops.stat().st_mode) & 0o222
    assert b"alice" not in ops.read_bytes() and str(b).encode() not in ops.read_bytes()
