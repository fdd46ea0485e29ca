"""Branch tracking: a cell with `track = "main"` builds the branch head resolved at run time
(a local bare repository over file://), records the commit in the report, and picks up a
commit pushed between two nights; the pinned lock is left alone."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import run_doit

GIT = ["git", "-c", "protocol.file.allow=always", "-c", "user.name=t", "-c", "user.email=t@t",
       "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"]
CMAKE = ("cmake_minimum_required(VERSION 3.18)\nproject(tracked C)\n"
         "add_library(tracked SHARED a.c)\ninstall(TARGETS tracked LIBRARY DESTINATION lib)\n")
# By path: .orch/env.sh sets no LD_LIBRARY_PATH (docs/bench.md), a bare soname is not found.
SMOKE = ("python -c 'import ctypes, os; assert ctypes.CDLL(os.environ[\\\"ORCH_PROFILE\\\"] + "
         "\\\"/prefix/lib/libtracked.so\\\").tracked_answer() == {answer}'")


def git(*args: str, cwd: Path) -> str:
    return subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def commit(work: Path, answer: int, extra: str = "") -> str:
    (work / "a.c").write_text(f"int tracked_answer(void) {{ return {answer}; }}\n{extra}")
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", f"answer {answer}", cwd=work)
    git("push", "-q", "origin", "HEAD:refs/heads/main", cwd=work)
    return git("rev-parse", "HEAD", cwd=work)


def config(answer: int) -> str:
    return (f'[[matrix]]\nrecipe = "tracked"\nvariants = ["release"]\ntrack = "main"\n'
            f'smoke = ["{SMOKE.format(answer=answer)}"]\n')


def test_tracks_the_branch_head_between_two_nights(project, store, tmp_path):
    bare, work = tmp_path / "tracked.git", tmp_path / "work"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    work.mkdir()
    git("init", "-q", cwd=work)
    git("remote", "add", "origin", bare.as_uri(), cwd=work)
    (work / "CMakeLists.txt").write_text(CMAKE)
    first = commit(work, 41)
    (project / "recipes" / "tracked.toml").write_text(
        f'[source]\nkind = "git"\nurl = "{bare.as_uri()}"\nrev = "main"\n\n[build]\nsystem = "cmake"\n\n'
        '[variants.release]\nbuild_type = "Release"\n')
    res = run_doit(project, "lock", "lock=git-sources", f"store={store}")
    assert res.returncode == 0, res.output
    lock = (project / "locks" / "git-sources.json").read_text()
    reports = tmp_path / "reports"

    def night(run: str, answer: int) -> dict:
        (project / "nightly.toml").write_text(config(answer))
        res = run_doit(project, "nightly", f"run={run}", f"store={store}", f"reports={reports}")
        assert res.returncode == 0, res.output
        [cell] = json.loads((reports / f"nightly-{run}.json").read_text())["cells"]
        assert cell["status"] == "ok", cell
        assert f"tracked/release: ok [main @ {cell['source']['commit'][:12]}]" in res.stderr
        return cell

    one = night("t1", 41)
    assert one["source"] == {"url": bare.as_uri(), "branch": "main", "commit": first,
                             "tree": one["source"]["tree"], "pinned_commit": first}
    second = commit(work, 42, "int tracked_extra(void) { return 1; }\n")
    two = night("t2", 42)  # the smoke test sees the new head's code
    assert two["source"]["commit"] == second and two["source"]["pinned_commit"] == first
    assert two["id"] != one["id"]
    assert two["abi_diff"]["files"]["lib/libtracked.so"]["added"] == ["tracked_extra"]
    assert (project / "locks" / "git-sources.json").read_text() == lock  # the pin is untouched
    # The same toolchain built both (one toolchain in the store).
    assert len(list((store / "toolchains").iterdir())) == 1
    html = (reports / "index.html").read_text()
    assert f"main @ <code>{second[:12]}</code>" in html
    # A branch that does not exist fails the cell at its source stage, with the reason.
    (project / "nightly.toml").write_text(config(42).replace('track = "main"', 'track = "nosuch"'))
    res = run_doit(project, "nightly", "run=t3", f"store={store}", f"reports={reports}")
    assert res.returncode == 1
    [cell] = json.loads((reports / "nightly-t3.json").read_text())["cells"]
    assert cell["stage"] == "source" and "'nosuch' is not a branch" in cell["error"]
