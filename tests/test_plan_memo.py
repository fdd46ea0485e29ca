"""The plan memo (issue 12): a repeated no-op build or switch is answered from what its last
plan read, without the planner; any input of that plan changed, and the full command runs
(and says what it always said). Real doit, real cmake builds of the demo, real git."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import DoitResult, run_doit

from orchestrator.cli import fast_path
from orchestrator.hashing import StatCache
from orchestrator.lock.probe_cache import ProbeCache
from orchestrator.memo import file_reads, plan_memo

# Runs doit in this process, as the command line does (its exit status in `code`).
RUN_DOIT = """
sys.argv = ["doit", *sys.argv[1:]]
code = 0
try:
    runpy.run_module("doit", run_name="__main__")
except SystemExit as e:
    code = e.code
"""
# ... and prints whether the planner ran.
PLANNER_RAN = "import json, runpy, sys\n" + RUN_DOIT + """
print(json.dumps({"exit": code, "planner": "orchestrator.realise.pipeline" in sys.modules,
                  "pydantic": "pydantic" in sys.modules, "rich": "rich" in sys.modules}))
"""


def traced_run(project: Path, *args: str, env: dict[str, str] | None = None) -> tuple[dict, str]:
    """doit *args in a fresh process: ({exit, planner, pydantic, rich}, its stderr)."""
    full = {k: v for k, v in os.environ.items() if k not in ("ORCH_STORE", "MAX_JOBS")}
    full.update(env or {})
    res = subprocess.run([sys.executable, "-c", PLANNER_RAN, "-f", str(project / "dodo.py"),
                          *args], cwd=project, capture_output=True, text=True, timeout=600,
                         env=full)
    return json.loads(res.stdout.strip().splitlines()[-1]), res.stderr


@pytest.fixture
def memo_doit(project: Path, store: Path) -> Callable[..., DoitResult]:
    def call(*args: str, env: dict[str, str] | None = None) -> DoitResult:
        return run_doit(project, *args, f"store={store}", env=env)
    return call


def answered_from_memo(project: Path, store: Path, *args: str,
                       env: dict[str, str] | None = None) -> bool:
    info, err = traced_run(project, *args, f"store={store}", env=env)
    assert info["exit"] in (0, None), err
    if not info["planner"]:
        assert not info["pydantic"] and not info["rich"], info  # nothing of the planner
    return not info["planner"]


def test_a_repeated_no_op_build_is_answered_without_the_planner(memo_doit, project: Path,
                                                                store: Path) -> None:
    first = memo_doit("build", "substitute=0", "format=json")
    assert first.returncode == 0, first.output
    slow = memo_doit("build", "substitute=0", "format=json")  # the full command: the memo's source
    assert slow.returncode == 0 and json.loads(slow.stdout)["origin"] == "present"
    assert answered_from_memo(project, store, "build", "substitute=0", "format=json")
    fast = memo_doit("build", "substitute=0", "format=json")
    assert fast.returncode == 0 and fast.stdout == slow.stdout  # the same JSON, byte for byte
    human = memo_doit("build", "substitute=0")
    assert human.returncode == 0
    assert answered_from_memo(project, store, "build", "substitute=0")
    again = memo_doit("build", "substitute=0")
    line = json.loads(slow.stdout)
    assert again.stderr.startswith(f"up to date: demo relwithdebinfo {line['id']}: present → "
                                   f"{line['path']} (")
    # variables that do more than look the plan up always run in full
    assert not answered_from_memo(project, store, "build", "substitute=0", "rebuild=1")


def test_a_switch_from_its_memo_moves_the_profile_as_the_full_one_does(
        memo_doit, project: Path, store: Path, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    sw = ("switch", f"workspace={ws}", "substitute=0", "format=json")
    out = {}
    for variant in ("release", "relwithdebinfo", "release", "relwithdebinfo"):
        res = memo_doit(*sw, f"variant={variant}")
        assert res.returncode == 0, res.output
        out.setdefault(variant, []).append(json.loads(res.stdout))
    assert answered_from_memo(project, store, *sw, "variant=release")  # generation 5
    fast = memo_doit(*sw, "variant=release")                          # generation 5 again
    data = json.loads(fast.stdout)
    assert out["release"][1]["origin"] == "present"
    assert data == {**out["release"][1], "generation": 5, "changed": False}
    assert os.readlink(ws / ".orch" / "profile") == "profile-5-link"
    assert Path(os.readlink(ws / ".orch" / "profile-5-link")) == Path(data["path"])
    assert answered_from_memo(project, store, *sw, "variant=relwithdebinfo")  # generation 6
    assert Path(os.readlink(ws / ".orch" / "profile-6-link")) == Path(out["relwithdebinfo"][0]["path"])
    env_sh = (ws / ".orch" / "env.sh").read_text()
    assert str(ws) in env_sh and os.readlink(ws / ".orch" / "toolchain").startswith(str(store))


def edit_source(project: Path, store: Path) -> None:
    kernel = project / "recipes" / "demo" / "ops" / "add_kernel.cpp"
    kernel.write_text(kernel.read_text() + "\nint orch_memo_marker() { return 2; }\n")


def add_recipe_comment(project: Path, store: Path) -> None:
    recipe = project / "recipes" / "demo.toml"
    recipe.write_text(recipe.read_text() + "\n# a comment\n")


def touch_lock(project: Path, store: Path) -> None:
    os.utime(project / "locks" / "toolchain.lock.json")


def remove_cache_toml(project: Path, store: Path) -> None:
    (project / "cache.toml").unlink(missing_ok=True)
    (project / "cache.toml").write_text("# empty\n")


def write_lock_spec(project: Path, store: Path) -> None:
    spec = project / "locks" / "toolchain.toml"
    spec.write_text(spec.read_text() + "\n# edited\n")  # now stale: the full command refuses


def delete_artifact(project: Path, store: Path) -> None:
    [art] = [p for p in (store / "store").iterdir() if p.name.endswith("-demo-relwithdebinfo")]
    for p in [art, *art.rglob("*")]:
        if p.is_dir() and not p.is_symlink():
            os.chmod(p, 0o755)
    shutil.rmtree(art)


def rewrite_manifest(project: Path, store: Path) -> None:
    [art] = [p for p in (store / "store").iterdir() if p.name.endswith("-demo-relwithdebinfo")]
    m = art / "manifest.json"
    os.chmod(art, 0o755)
    text = m.read_text()
    os.chmod(m, 0o644)
    m.unlink()
    m.write_text(text)


def leave_stale_temp(project: Path, store: Path) -> None:
    (store / "tmp").mkdir(exist_ok=True)
    (store / "tmp" / "stage.tmp-999999999-abcd1234").mkdir()


CHANGES = {
    "source edited": (edit_source, "built"),
    "recipe edited": (add_recipe_comment, "present"),
    "lock touched": (touch_lock, "present"),
    "cache.toml rewritten": (remove_cache_toml, "present"),
    "lock spec edited": (write_lock_spec, "refused"),
    "artifact deleted": (delete_artifact, "built"),
    "manifest rewritten": (rewrite_manifest, "present"),
    "stale temp left": (leave_stale_temp, "present"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_any_input_of_the_plan_changed_runs_the_full_command(memo_doit, project: Path,
                                                             store: Path, change: str) -> None:
    args = ("build", "substitute=0", "format=json")
    assert memo_doit(*args).returncode == 0
    assert memo_doit(*args).returncode == 0
    assert answered_from_memo(project, store, *args)
    before = json.loads(memo_doit(*args).stdout)
    mutate, outcome = CHANGES[change]
    mutate(project, store)
    info, err = traced_run(project, *args, f"store={store}")
    assert info["planner"], f"{change}: answered from the memo"
    if outcome == "refused":
        assert info["exit"] == 2 and "stale" in err, err
        return
    assert info["exit"] in (0, None), err
    after = json.loads(memo_doit(*args).stdout)
    assert after["origin"] == "present"
    assert (after["id"] != before["id"]) == (change == "source edited")
    if change == "stale temp left":
        assert not list((store / "tmp").glob("stage.tmp-999999999-*"))  # cleaned up
    assert answered_from_memo(project, store, *args)  # and the new memo serves the next one


def test_the_environment_and_the_variables_key_the_memo(memo_doit, project: Path,
                                                         store: Path) -> None:
    args = ("build", "substitute=0")
    assert memo_doit(*args).returncode == 0
    assert memo_doit(*args).returncode == 0
    assert answered_from_memo(project, store, *args)
    assert answered_from_memo(project, store, *args, env={"OLDPWD": "/elsewhere", "SHLVL": "9"})
    assert not answered_from_memo(project, store, *args, env={"CXXFLAGS": "-O0"})
    assert not answered_from_memo(project, store, *args, "variant=release")
    assert not answered_from_memo(project, store, *args, env={"ORCH_PLAN_MEMO": "0"})
    assert not answered_from_memo(project, store, "-v", "2", "build", "substitute=0")


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                   check=True, capture_output=True)


def one_commit_checkout(tmp_path: Path) -> Path:
    """A git checkout of one file, committed once."""
    src = tmp_path / "checkout"
    src.mkdir()
    (src / "a.cpp").write_text("int a;\n")
    git(src, "init", "-q")
    git(src, "add", "-A")
    git(src, "commit", "-qm", "one")
    return src


def test_a_checkout_given_as_source_is_hashed_again_each_time(memo_doit, project: Path,
                                                               store: Path, tmp_path: Path) -> None:
    """source=PATH of the demo (a path recipe): its tree digest is made again, so git
    bookkeeping alone (add, commit) keeps the memo and an edited file does not."""
    src = tmp_path / "checkout"
    shutil.copytree(project / "recipes" / "demo", src)
    git(src, "init", "-q")
    git(src, "add", "-A")
    git(src, "commit", "-qm", "demo")
    args = ("build", f"source={src}", "substitute=0", "format=json")
    ids = [json.loads(memo_doit(*args).stdout)["id"] for _ in range(2)]
    assert ids[0] == ids[1] and answered_from_memo(project, store, *args)
    (src / "NOTES.txt").write_text("notes\n")                 # a new file: another tree
    assert not answered_from_memo(project, store, *args)
    third = json.loads(memo_doit(*args).stdout)["id"]
    assert third != ids[0]
    git(src, "add", "NOTES.txt")
    git(src, "commit", "-qm", "notes")                         # the same files
    assert answered_from_memo(project, store, *args)
    kernel = src / "ops" / "add_kernel.cpp"
    kernel.write_text(kernel.read_text() + "\n// edited\n")
    assert not answered_from_memo(project, store, *args)


# Runs doit in this process, as the command line does, counting how often the tree digest of
# the directory argv[1] is made (the fast path's redo and the planner's source identity).
DIGESTS_MADE = """
import json, runpy, sys
from pathlib import Path
from orchestrator import hashing
from orchestrator.sources import path as source_path
src, real, made = Path(sys.argv.pop(1)), hashing.tree_digest, []
def counting(root, *args, **kwargs):
    made.extend([1] if Path(root) == src else [])
    return real(root, *args, **kwargs)
hashing.tree_digest = source_path.tree_digest = counting
""" + RUN_DOIT + """
print(json.dumps({"exit": code, "made": len(made)}))
"""


def test_the_plan_takes_the_identity_the_fast_path_just_made(memo_doit, project: Path,
                                                             store: Path, tmp_path: Path) -> None:
    """A memo that does not hold because the source changed: the fast path made the tree's
    identity again to find that out, and the planner takes that result (file_reads.offer)
    instead of hashing the tree a second time."""
    src = tmp_path / "checkout"
    shutil.copytree(project / "recipes" / "demo", src)
    args = ("build", f"source={src}", "substitute=0", "format=json")
    first = json.loads(memo_doit(*args).stdout)
    kernel = src / "ops" / "add_kernel.cpp"
    before = kernel.read_text()
    kernel.write_text(before + "\n// edited\n")
    assert json.loads(memo_doit(*args).stdout)["id"] != first["id"]   # memo: the edit
    kernel.write_text(before)                                          # back: first's tree
    env = {k: v for k, v in os.environ.items() if k not in ("ORCH_STORE", "MAX_JOBS")}
    res = subprocess.run([sys.executable, "-c", DIGESTS_MADE, str(src), "-f",
                          str(project / "dodo.py"), *args, f"store={store}"], cwd=project,
                         capture_output=True, text=True, timeout=600, env=env)
    out = res.stdout.strip().splitlines()
    info, answer = json.loads(out[-1]), json.loads(out[-2])
    assert info["exit"] in (0, None), res.stderr
    assert answer["id"] == first["id"] and answer["origin"] == "present", answer
    assert info["made"] == 1, info   # the fast path's, taken by the planner


def test_a_git_checkouts_identity_is_made_again_from_git(tmp_path: Path) -> None:
    """A git-aware checkout identity (source=PATH of an archive recipe: PyTorch) is recorded
    as a call; made again, it follows HEAD, the index and untracked files."""
    from orchestrator.sources.checkout import prepare_checkout
    from orchestrator.store.artifacts import Store

    src = one_commit_checkout(tmp_path)
    store = Store(tmp_path / "store")
    store.ensure()
    with file_reads.tracing() as t:
        prepared = prepare_checkout(str(src), store)
    assert t.unsafe is None  # git ran inside the recorded call
    [[kind, args, identity]] = t.redo
    assert kind == "checkout" and identity == prepared.identity
    cache = StatCache(tmp_path / "stat-cache.json")
    assert fast_path.redo(kind, args, cache) == identity
    changes = [lambda: (src / "b.txt").write_text("untracked\n"),
               lambda: git(src, "add", "b.txt"),
               lambda: git(src, "commit", "-qm", "two"),
               lambda: (src / "a.cpp").write_text("int a2;\n")]
    seen = [identity]
    for change in changes:
        change()
        now = fast_path.redo(kind, args, cache)
        assert now not in seen
        seen.append(now)


def test_a_memo_this_code_cannot_trust_is_never_used(memo_doit, project: Path, store: Path,
                                                      tmp_path: Path) -> None:
    args = ("build", "substitute=0", "format=json")
    assert memo_doit(*args).returncode == 0
    assert memo_doit(*args).returncode == 0
    [memo] = (store / "cache" / "plan-memo").iterdir()
    good = json.loads(memo.read_text())
    outside = tmp_path / "elsewhere" / (Path(good["artifact"]).name)
    outside.mkdir(parents=True)
    (outside / "manifest.json").write_text("{}")
    hostile = [b"", b"{", b"[]", b"null", json.dumps({**good, "format": 99}).encode(),
               json.dumps({**good, "files": 5}).encode(),
               json.dumps({**good, "files": [["a"]]}).encode(),
               json.dumps({**good, "redo": [["tree", [], None]]}).encode(),
               json.dumps({**good, "redo": [["nonsense", [1], 1]]}).encode(),
               json.dumps({**good, "artifact": str(outside),
                           "manifest": file_reads.stat_sig(str(outside / "manifest.json"))}).encode(),
               json.dumps({**good, "id": "0" * 40}).encode(),
               json.dumps({**good, "manifest": None}).encode()]
    for text in hostile:
        memo.write_bytes(text)
        info, err = traced_run(project, *args, f"store={store}")
        assert info["exit"] in (0, None) and info["planner"], (text[:80], err)
        assert "Traceback" not in err
    assert json.loads(memo.read_text())["artifact"] == good["artifact"]  # written anew
    ws = tmp_path / "ws"
    ws.mkdir()
    sw = ("switch", f"workspace={ws}", "substitute=0", "format=json")
    assert memo_doit(*sw).returncode == 0
    assert memo_doit(*sw).returncode == 0
    [switch_memo] = [p for p in (store / "cache" / "plan-memo").iterdir() if p != memo]
    good = json.loads(switch_memo.read_text())
    toolchains = store / "toolchains"
    for bad in (None, 5, {}, {**good["switch"], "workspace": str(tmp_path)},
                {**good["switch"], "toolchain": str(tmp_path)},
                {**good["switch"], "toolchain": str(toolchains / ("0" * 32))},
                {**good["switch"], "outputs": None}):
        switch_memo.write_text(json.dumps({**good, "switch": bad}))
        info, err = traced_run(project, *sw, f"store={store}")
        assert info["exit"] in (0, None) and info["planner"], (bad, err)
        assert "Traceback" not in err


def test_gc_removes_the_memo_of_an_artifact_it_deletes(memo_doit, project: Path, store: Path,
                                                        tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    assert memo_doit("build", "substitute=0", "variant=release").returncode == 0
    assert memo_doit("switch", f"workspace={ws}", "substitute=0").returncode == 0
    memos = {p.name: plan_memo.memo_artifact(p) for p in (store / "cache" / "plan-memo").iterdir()}
    assert len(memos) == 2
    res = memo_doit("gc", "keep=1")
    assert res.returncode == 0, res.output
    left = {p.name: plan_memo.memo_artifact(p) for p in (store / "cache" / "plan-memo").iterdir()}
    assert len(left) == 1 and all(Path(a).is_dir() and "relwithdebinfo" in a for a in left.values())


def test_the_trace_notes_what_the_caches_answered_for(tmp_path: Path) -> None:
    """Files a stat cache or the probe cache answered for are noted with their stat; a probe
    asked inside the probe cache does not spoil the trace, any other subprocess does."""
    f = tmp_path / "input"
    f.write_text("x")
    binary = shutil.which("true")
    with file_reads.tracing() as t:
        StatCache(tmp_path / "cache.json").sha256(f)
        ProbeCache(tmp_path / "probes.json").answer(
            binary, "--version", lambda: subprocess.run([binary]).returncode == 0)
        (tmp_path / "read.txt").write_text("r")
        (tmp_path / "read.txt").read_text()
        file_reads.note_path(tmp_path / "absent.toml")
        got = file_reads.recorded("tree", ["x"], lambda: subprocess.run([binary]) and "d")
    assert t.unsafe is None
    assert t.files[str(f)] == file_reads.stat_sig(str(f))
    assert t.files[str(tmp_path / "read.txt")] is not None
    assert t.files[str(tmp_path / "absent.toml")] is None
    assert binary in t.bins and got == "d" and t.redo == [["tree", ["x"], "d"]]
    with file_reads.tracing() as t2:
        subprocess.run([binary])
    assert t2.unsafe is not None
    outside = tmp_path / "outside.txt"
    outside.write_text("o")
    outside.read_text()  # no trace running: nothing noted anywhere
    assert str(outside) not in t.files and str(outside) not in t2.files


def test_the_code_keys_the_memo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another orchestrator (a pull, an edit) never takes this one's memo."""
    pkg = tmp_path / "orchestrator"
    shutil.copytree(plan_memo.PACKAGE, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(plan_memo, "PACKAGE", pkg)
    one = plan_memo.command_of(tmp_path, ["build"])
    (pkg / "plan" / "derivation.py").write_text((pkg / "plan" / "derivation.py").read_text() + "\n# edited\n")
    two = plan_memo.command_of(tmp_path, ["build"])
    assert one is not None and two is not None and one.key != two.key
    assert plan_memo.command_of(tmp_path, ["build", "x=1", "x=2"]) is None  # given twice
    assert plan_memo.command_of(tmp_path, ["lock"]) is None
    assert plan_memo.command_of(tmp_path, ["help", "build"]) is None


def test_a_clean_checkout_is_identified_without_git_diff(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`git diff HEAD` runs only when status lists a tracked change (0.04 s on PyTorch's
    tree, every no-op build of a checkout); the identity is the same either way."""
    from orchestrator.sources import checkout

    src = one_commit_checkout(tmp_path)
    ran: list[str] = []
    real = checkout._git

    def spy(path: Path, *args: str) -> bytes:
        ran.append(args[0])
        return real(path, *args)

    monkeypatch.setattr(checkout, "_git", spy)
    cache = StatCache(tmp_path / "stat-cache.json")
    clean = checkout.checkout_identity(src, cache)
    assert "diff" not in ran and clean["diff_sha256"] == checkout.sha256_bytes(b"")
    (src / "a.cpp").write_text("int b;\n")
    dirty = checkout.checkout_identity(src, cache)
    assert ran.count("diff") == 1 and dirty["diff_sha256"] != clean["diff_sha256"]
    (src / "a.cpp").write_text("int a;\n")  # back as committed: clean again, the same identity
    assert checkout.checkout_identity(src, cache) == clean and ran.count("diff") == 1


def test_a_managed_workspace_switch_is_fast_once_its_ide_files_are_settled(
        memo_doit, project: Path, store: Path) -> None:
    """The F5 loop: VS Code's preLaunchTask runs `doit switch` before each debug run. Once a
    refresh wrote nothing, the next switch checks the IDE files instead of rendering them;
    a user's edit or another variant renders them again (and the edit is kept)."""
    assert memo_doit("vscode").returncode == 0
    sw = ("switch", "substitute=0")
    for _ in range(2):  # the first refresh writes (tasks.json follows the switch), the second not
        res = memo_doit(*sw)
        assert res.returncode == 0, res.output
    tasks = project / ".vscode" / "tasks.json"
    before = file_reads.stat_sig(str(tasks))
    assert answered_from_memo(project, store, *sw)
    assert file_reads.stat_sig(str(tasks)) == before
    assert not answered_from_memo(project, store, *sw, "variant=release")
    assert "variant=release" in build_task_args(project)
    assert not answered_from_memo(project, store, *sw)  # back: the files name release
    assert "variant=relwithdebinfo" in build_task_args(project)
    assert not answered_from_memo(project, store, *sw)  # settled: nothing written, memo kept
    assert answered_from_memo(project, store, *sw)
    launch = project / ".vscode" / "launch.json"
    data = json.loads(launch.read_text())
    data["configurations"].append({"name": "mine", "type": "lldb", "request": "launch"})
    launch.write_text(json.dumps(data, indent=2))
    assert not answered_from_memo(project, store, *sw)
    assert "mine" in launch.read_text()


def build_task_args(project: Path) -> list[str]:
    tasks = json.loads((project / ".vscode" / "tasks.json").read_text())["tasks"]
    return {t["label"]: t for t in tasks}["orch: build"]["args"]
