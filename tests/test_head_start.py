"""The head start (issue 12's edit loop): after an edit, the fast path starts the last build's
ninja before the planner runs; the build adopts it when the plan asks for that very ninja,
and anything else stops it and removes what it built. Real doit, cmake and ninja builds of
the demo; real ninja trees for the pieces."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_doit
from filelock import FileLock, Timeout

from orchestrator.memo import head_start
from orchestrator.memo.file_reads import stat_sig
from orchestrator.model.store_layout import StorePaths

AHEAD = "started ahead of the plan (head start)"
NINJA = shutil.which("ninja")


def edit(project: Path, n: int) -> None:
    kernel = project / "recipes" / "demo" / "ops" / "add_kernel.cpp"
    kernel.write_text(kernel.read_text() + f"\nint orch_head_start_{n}() {{ return {n}; }}\n")


def test_an_edit_is_built_from_its_head_start_as_a_clean_build_would_be(
        project: Path, store: Path) -> None:
    s = f"store={store}"
    first = run_doit(project, "build", s, "substitute=0", "format=json")
    assert first.returncode == 0 and AHEAD not in first.stderr, first.output  # no memo yet
    edit(project, 1)
    res = run_doit(project, "build", s, "substitute=0", "format=json")
    assert res.returncode == 0, res.output
    assert AHEAD in res.stderr
    assert "compile cache: 0 hit(s), 1 miss(es)" in res.stderr  # its stats are this build's
    art = Path(json.loads(res.stdout)["path"])
    steps = (art / "meta" / "ninja_log").read_text()
    assert "add_kernel.cpp.o" in steps and "registry.cpp.o" not in steps  # this build's only
    # A clean rebuild in a fresh tree gives the same files (check=1 fails on any difference).
    check = run_doit(project, "build", s, "substitute=0", "check=1")
    assert check.returncode == 0, check.output
    # The F5 loop: a switch that found its artifact present keeps the head start for the
    # next edit.
    ws = project / "ws"
    ws.mkdir()
    assert run_doit(project, "switch", s, f"workspace={ws}", "substitute=0").returncode == 0
    assert run_doit(project, "switch", s, f"workspace={ws}", "substitute=0").returncode == 0
    edit(project, 2)
    sw = run_doit(project, "switch", s, f"workspace={ws}", "substitute=0")
    assert sw.returncode == 0 and AHEAD in sw.stderr, sw.output
    # Without memos, no head start.
    edit(project, 3)
    off = run_doit(project, "build", s, "substitute=0", env={"ORCH_PLAN_MEMO": "0"})
    assert off.returncode == 0 and AHEAD not in off.stderr, off.output


def test_a_head_start_the_plan_does_not_ask_for_is_stopped_and_what_it_built_removed(
        project: Path, store: Path) -> None:
    """The memo's ninja is not the one the plan asks for (here: the memo says -j 1): the head
    start is stopped, what it built removed, and the plan's own ninja builds the edit."""
    s = f"store={store}"
    assert run_doit(project, "build", s, "substitute=0").returncode == 0
    [tree] = [d for d in (store / "build").iterdir() if (d / head_start.SPEC).is_file()]
    spec = json.loads((tree / head_start.SPEC).read_text())
    spec["argv"][4] = "1"  # the tree's last ninja differs from the plan's: another -j
    (tree / head_start.SPEC).write_text(json.dumps(spec))
    edit(project, 1)
    res = run_doit(project, "build", s, "substitute=0")
    assert res.returncode == 0, res.output
    assert AHEAD not in res.stderr
    assert "head start stopped: the plan runs another ninja" in res.stderr
    check = run_doit(project, "build", s, "substitute=0", "check=1")
    assert check.returncode == 0, check.output
    assert tree.is_dir()


def test_a_tree_built_through_a_compile_cache_server_keeps_no_head_start(
        project: Path, store: Path) -> None:
    """sccache runs a server per build (and a remote or distcc would reach other hosts): its
    ninja is never started ahead, and the tree forgets the ninja of an earlier build."""
    s = f"store={store}"
    assert run_doit(project, "build", s, "substitute=0").returncode == 0
    [tree] = [d for d in (store / "build").iterdir() if (d / head_start.SPEC).is_file()]
    edit(project, 1)  # (the compile cache is no input of the artifact: only an edit builds)
    res = run_doit(project, "build", s, "substitute=0", "compile_cache=sccache")
    assert res.returncode == 0, res.output
    assert not (tree / head_start.SPEC).exists(), res.output
    edit(project, 2)
    again = run_doit(project, "build", s, "substitute=0", "compile_cache=sccache")
    assert again.returncode == 0 and AHEAD not in again.stderr, again.output


def test_the_tree_s_ninja_starts_while_the_identity_is_made_again_and_a_no_op_stops_it(
        project: Path, store: Path, monkeypatch: pytest.MonkeyPatch, clean_head_start) -> None:
    """Making the source's identity again (git status, the tree's hash) takes as long as a
    small compile, so the fast path starts the tree's last ninja before it: the identity
    unchanged (a no-op), that ninja is stopped and the tree keeps everything; changed, it
    runs on for the full command to adopt."""
    from orchestrator.cli import fast_path
    from orchestrator.memo import plan_memo

    s = f"store={store}"
    assert run_doit(project, "build", s, "substitute=0").returncode == 0
    [memo_file] = StorePaths(store).memos.glob("*.json")
    memo = json.loads(memo_file.read_text())
    assert memo["redo"], memo  # the demo's tree digest: made again by every command
    [tree] = [d for d in (store / "build").iterdir() if (d / head_start.SPEC).is_file()]
    log_before = (tree / head_start.NINJA_LOG).read_bytes()
    outputs = sorted(p.relative_to(tree) for p in tree.rglob("*.o"))
    cmd = plan_memo.Command("build", {}, "test", store, project)
    started: list[Path] = []
    real_start = head_start.start
    monkeypatch.setattr(head_start, "start", lambda t, *a: started.append(t) or real_start(t, *a))

    assert fast_path.still_holds(cmd, memo)                    # a no-op
    assert started == [tree] and not head_start.running_in(tree)  # started, then stopped
    FileLock(str(store / "locks" / f"build-{tree.name}.lock"), timeout=0).acquire()
    assert (tree / head_start.NINJA_LOG).read_bytes() == log_before
    assert sorted(p.relative_to(tree) for p in tree.rglob("*.o")) == outputs

    edit(project, 1)
    assert not fast_path.still_holds(cmd, memo)                # the edit: it runs on
    assert started == [tree, tree] and head_start.running_in(tree)


# -- the pieces, on real ninja trees ---------------------------------------------------------

def ninja_tree(root: Path, sleep: float = 0) -> tuple[Path, Path]:
    """(store's build dir, a tree in it) whose build.ninja copies in.txt to out.txt and
    stamps stamp.txt, each after `sleep` seconds."""
    build = root / "build"
    tree = build / "demo-relwithdebinfo-0123abcd"
    tree.mkdir(parents=True)
    (tree / "in.txt").write_text("one\n")
    (tree / "build.ninja").write_text(
        f"rule copy\n  command = sleep {sleep} && cp $in $out\n"
        "build out.txt: copy in.txt\n"
        "build stamp.txt: copy out.txt\n")
    return build, tree


def spec_of(tree: Path) -> dict:
    """What head_start.remember_ninja keeps in the tree, as the tree's file holds it."""
    spec = {"build_dir": str(tree), "argv": [NINJA, "-C", str(tree), "-j", "1"],
            "env": {"PATH": os.environ["PATH"]}, "programs": [[NINJA, stat_sig(NINJA)]],
            "stats_log": None}
    (tree / head_start.SPEC).write_text(json.dumps(spec))
    return spec


@pytest.fixture
def clean_head_start():
    yield
    head_start.stop()


def test_an_adopted_head_start_is_its_own_ninja_to_the_end(tmp_path: Path,
                                                            clean_head_start) -> None:
    build, tree = ninja_tree(tmp_path)
    spec = spec_of(tree)
    assert head_start.start(tree, build, tmp_path / "locks")
    assert head_start.running_in(tree)
    lock = FileLock(str(tmp_path / "locks" / f"build-{tree.name}.lock"))
    assert head_start.reentrant_lock(lock) is not lock  # realise.build re-enters the held lock
    # the build's environment takes TERM from the caller (Toolchain.build_env): so does this
    env = {**spec["env"], **{k: os.environ[k] for k in head_start.FROM_CALLER if k in os.environ}}
    with head_start.adopting(spec["argv"], env) as (ahead, stopped):
        assert ahead is not None and not stopped
        out = "".join(ahead.output())
        assert ahead.step.proc.wait() == 0
        ahead.step.release()
    assert "out.txt" in out or "stamp.txt" in out
    assert (tree / "stamp.txt").read_text() == "one\n"
    assert not head_start.running_in(tree)
    FileLock(str(tmp_path / "locks" / f"build-{tree.name}.lock"), timeout=0).acquire()


def test_a_head_start_not_adopted_is_stopped_and_its_outputs_removed(
        tmp_path: Path, clean_head_start) -> None:
    build, tree = ninja_tree(tmp_path)
    subprocess.run([NINJA, "-C", str(tree)], check=True, capture_output=True)
    (tree / "in.txt").write_text("two\n")  # an edit: both outputs are built again
    spec = spec_of(tree)
    assert head_start.start(tree, build, tmp_path / "locks")
    while not (tree / "stamp.txt").read_text() == "two\n":  # let it finish its work
        time.sleep(0.05)
    time.sleep(0.2)
    with head_start.adopting([*spec["argv"][:-1], "2"], spec["env"]) as (ahead, stopped):
        assert ahead is None and stopped  # another ninja: this one is stopped first
    assert not (tree / "out.txt").exists() and not (tree / "stamp.txt").exists()
    assert (tree / "in.txt").exists() and (tree / "build.ninja").exists()
    FileLock(str(tmp_path / "locks" / f"build-{tree.name}.lock"), timeout=0).acquire()
    again = subprocess.run([NINJA, "-C", str(tree)], capture_output=True, text=True)
    assert again.returncode == 0 and (tree / "stamp.txt").read_text() == "two\n"


def test_discard_removes_only_what_was_built_after_the_offset(tmp_path: Path) -> None:
    _, tree = ninja_tree(tmp_path)
    (tree / "build.ninja").write_text(
        "rule copy\n  command = cp $in $out\n"
        "build a.out: copy a.in\nbuild b.out: copy b.in\n")
    (tree / "a.in").write_text("a")
    (tree / "b.in").write_text("b")
    subprocess.run([NINJA, "-C", str(tree)], check=True, capture_output=True)
    offset = (tree / ".ninja_log").stat().st_size
    time.sleep(0.01)
    (tree / "b.in").write_text("B")
    subprocess.run([NINJA, "-C", str(tree)], check=True, capture_output=True)
    head_start.discard_built(tree, offset)
    assert (tree / "a.out").exists() and not (tree / "b.out").exists()
    # An entry naming a path outside the tree is never deleted.
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    with open(tree / ".ninja_log", "a") as log:
        log.write(f"1\t2\t3\t../../{outside.name}\tabc\n1\t2\t3\t{outside}\tabc\n")
    head_start.discard_built(tree, offset)
    assert outside.read_text() == "keep"


def hostile_specs(build: Path, tree: Path) -> dict[str, object]:
    good = spec_of(tree)
    other = build.parent / "elsewhere"
    (other / "t").mkdir(parents=True)
    (other / "t" / "build.ninja").write_text("")

    def bent(**kw: object) -> dict:
        return {**good, **kw}

    return {
        "not JSON": "{not json",
        "not a dict": [good],
        "argv not strings": bent(argv=[NINJA, "-C", str(tree), 1, 2]),
        "argv too short": bent(argv=[NINJA]),
        "env not strings": bent(env={"PATH": 1}),
        "tree outside the store": bent(build_dir=str(other / "t"),
                                       argv=[NINJA, "-C", str(other / "t"), "-j", "1"]),
        "-C another tree": bent(argv=[NINJA, "-C", str(other / "t"), "-j", "1"]),
        "runs another program": bent(argv=["/bin/sh", "-C", str(tree), "-j", "1"]),
        "program changed": bent(programs=[[NINJA, [1, 2, 3, 4, 5]]]),
        "no programs": bent(programs=[]),
        "stats log elsewhere": bent(stats_log=str(other / "stats")),
        "build_dir missing": {k: v for k, v in good.items() if k != "build_dir"},
        "tree without build.ninja": bent(build_dir=str(build / "gone"),
                                         argv=[NINJA, "-C", str(build / "gone"), "-j", "1"]),
        "locks not a list": bent(locks="pytorch-source-x.lock"),
        "a lock outside the store's locks/": bent(locks=[str(other / "x.lock")]),
        "a lock not a string": bent(locks=[1]),
        "a lock file not named .lock": bent(locks=[str(build.parent / "locks" / "x.json")]),
        "the tree's own lock again": bent(
            locks=[str(build.parent / "locks" / f"build-{tree.name}.lock")]),
    }


def test_a_head_start_spec_this_code_cannot_trust_starts_nothing(tmp_path: Path,
                                                                  clean_head_start) -> None:
    build, tree = ninja_tree(tmp_path)
    for name, spec in hostile_specs(build, tree).items():
        (tree / head_start.SPEC).write_text(spec if isinstance(spec, str) else json.dumps(spec))
        assert not head_start.start(tree, build, tmp_path / "locks"), name
        assert not head_start.running_in(tree), name
    assert not (tree / "out.txt").exists()


def test_a_tree_another_build_holds_gets_no_head_start(tmp_path: Path,
                                                       clean_head_start) -> None:
    build, tree = ninja_tree(tmp_path)
    (tmp_path / "locks").mkdir()
    with held_elsewhere(tmp_path / "locks" / f"build-{tree.name}.lock"):
        spec_of(tree)
        assert not head_start.start(tree, build, tmp_path / "locks")
        assert not (tree / "out.txt").exists()


@contextlib.contextmanager
def held_elsewhere(lock_file: Path) -> Iterator[None]:
    """`lock_file` held by another process for the block (as another build holds it)."""
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from filelock import FileLock; l = FileLock(sys.argv[1]); "
        "l.acquire(); print('held', flush=True); time.sleep(60)"), str(lock_file)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.kill()
        holder.wait()


def test_a_head_start_holds_the_locks_its_builder_named(tmp_path: Path,
                                                         clean_head_start) -> None:
    """PyTorch's builder also holds its checkout's source lock around ninja (codegen writes
    into the checkout): a head start takes it too, realise and the builder re-enter it, and
    adoption releases every lock."""
    build, tree = ninja_tree(tmp_path)
    locks = tmp_path / "locks"
    source = locks / "pytorch-source-0123456789abcdef.lock"
    spec = {**spec_of(tree), "locks": [str(source)]}
    (tree / head_start.SPEC).write_text(json.dumps(spec))
    assert head_start.start(tree, build, locks)
    theirs = FileLock(str(source))
    assert head_start.reentrant_lock(theirs) is not theirs
    with pytest.raises(Timeout):  # no one else can take it now
        FileLock(str(source), timeout=0).acquire()
    env = {**spec["env"], **{k: os.environ[k] for k in head_start.FROM_CALLER if k in os.environ}}
    with head_start.reentrant_lock(theirs):
        with head_start.adopting(spec["argv"], env) as (ahead, _):
            assert ahead is not None
            "".join(ahead.output())
            ahead.step.proc.wait()
            ahead.step.release()
    for path in (source, locks / f"build-{tree.name}.lock"):
        FileLock(str(path), timeout=0).acquire()


def test_a_named_lock_another_build_holds_means_no_head_start(tmp_path: Path,
                                                             clean_head_start) -> None:
    """The checkout's source lock is held elsewhere (a build of another variant in the same
    checkout): nothing starts, and the tree's lock it took first is let go."""
    build, tree = ninja_tree(tmp_path)
    locks = tmp_path / "locks"
    locks.mkdir()
    source = locks / "pytorch-source-0123456789abcdef.lock"
    (tree / head_start.SPEC).write_text(json.dumps({**spec_of(tree), "locks": [str(source)]}))
    with held_elsewhere(source):
        assert not head_start.start(tree, build, locks)
        assert not head_start.running_in(tree) and not (tree / "out.txt").exists()
        FileLock(str(locks / f"build-{tree.name}.lock"), timeout=0).acquire()


def test_a_killed_command_stops_its_head_start(tmp_path: Path) -> None:
    """SIGKILL of the process that started it: its guard stops ninja and its jobs."""
    build, tree = ninja_tree(tmp_path, sleep=30)
    script = (
        "import json, os, signal, sys\n"
        "from pathlib import Path\n"
        "from orchestrator.memo import head_start\n"
        "assert head_start.start(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))\n"
        "print(head_start.STATE.head_start.step.proc.pid, flush=True)\n"
        "sys.stdin.readline()\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    spec_of(tree)
    proc = subprocess.Popen([sys.executable, "-c", script, str(tree), str(build),
                             str(tmp_path / "locks")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    ninja_pid = int(proc.stdout.readline())
    deadline = time.monotonic() + 10
    while not any(b"sleep" in p.read_bytes() for p in Path("/proc").glob("*/cmdline")
                  if p.parent.name.isdigit() and _in_group(p.parent, ninja_pid)):
        assert time.monotonic() < deadline, "ninja never started its job"
        time.sleep(0.05)
    proc.stdin.write("go\n")
    proc.stdin.flush()
    assert proc.wait(timeout=30) == -signal.SIGKILL
    deadline = time.monotonic() + 20
    while any(_in_group(p, ninja_pid) for p in Path("/proc").iterdir() if p.name.isdigit()):
        assert time.monotonic() < deadline, "the head start outlived its command"
        time.sleep(0.1)
    FileLock(str(tmp_path / "locks" / f"build-{tree.name}.lock"), timeout=0).acquire()


def _in_group(proc_dir: Path, pgid: int) -> bool:
    """Whether /proc/<pid> is ninja (pgid) or a process of a group ninja's jobs run in."""
    try:
        stat = (proc_dir / "stat").read_text()
    except OSError:
        return False
    fields = stat.rpartition(")")[2].split()
    state, ppid, group = fields[0], int(fields[1]), int(fields[2])
    return state != "Z" and (int(proc_dir.name) == pgid or group == pgid or ppid == pgid)

