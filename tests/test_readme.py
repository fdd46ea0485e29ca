"""The README is true line by line: its "Everyday use" block runs as written in a fresh
copy of the project after what bootstrap.sh does (build + switch the demo), and .ci/run is
exactly the README's two commands."""
from __future__ import annotations

import os
import re
from pathlib import Path

from conftest import REPO, copy_project, make_store
from doc_shell import run_lines, strip_comment


def readme_block(title: str) -> list[str]:
    """The command lines of the first ```sh block after the `## <title>` heading."""
    text = (REPO / "README.md").read_text()
    section = text.split(f"## {title}\n", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [ln for ln in block.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def test_ci_runs_exactly_the_readme_commands():
    two = readme_block("Two commands (fresh Debian 12)")
    ci = [ln for ln in (REPO / ".ci/run").read_text().splitlines()
          if ln.strip() and not ln.startswith("#") and not re.match(r"^(set|cd) ", ln)]
    assert [strip_comment(ln) for ln in two] == ci


def test_everyday_use_block_runs_line_by_line(tmp_path, session_toolchain):
    project = copy_project(tmp_path / "project")
    os.symlink(REPO / ".venv", project / ".venv")
    store = make_store(tmp_path / "store", session_toolchain)
    lines = [strip_comment(ln) for ln in readme_block("Everyday use")]
    assert any(ln.startswith("doit rollback") for ln in lines)
    # What bootstrap.sh does after set-up, then the block as one shell (sourced state carries).
    env = {k: v for k, v in os.environ.items() if k not in ("MAX_JOBS", "VIRTUAL_ENV")}
    env["ORCH_STORE"] = str(store)
    res = run_lines(project, [".venv/bin/doit build variant=relwithdebinfo",
                              ".venv/bin/doit switch variant=relwithdebinfo"], lines, env, 1200)
    out = res.output
    assert res.returncode == 0, f"README line failed: {res.failed_line}\n{out[-4000:]}"
    assert "Traceback" not in out, out[-4000:]
    types = re.findall(r"^(Release|RelWithDebInfo)$", res.stdout, re.M)
    assert types == ["Release", "RelWithDebInfo"], out[-3000:]
    # The lldb line stopped in the kernel with its source found through .lldbinit's map.
    assert "stop reason = breakpoint" in out and "demo::native::add_kernel" in out, out[-4000:]
    assert "is not being read" not in out, out[-4000:]      # the wrapper runs lldb -x
    assert Path(project / ".vscode/launch.json").is_file()


def test_team_cache_block_runs_line_by_line(tmp_path, session_toolchain):
    """The team block, as written, after `doit build variant=release`: a key, the cache's
    directory, cache.toml, the check, both pushes, a teammate's pull into an empty store.
    Only its two /tmp paths are moved under the test's own directory."""
    project = copy_project(tmp_path / "project")
    os.symlink(REPO / ".venv", project / ".venv")
    store = make_store(tmp_path / "store", session_toolchain)
    lines = [strip_comment(ln) for ln in readme_block("Team cache")]
    assert [ln.split()[:2] for ln in lines if ln.startswith("doit ")] == [
        ["doit", "cache-keygen"], ["doit", "cache-check"], ["doit", "push"], ["doit", "push"],
        ["doit", "pull"]]
    assert not any("ORCH_CACHE_TOKEN=..." in ln for ln in lines)
    # the artifact pushed is the one pulled
    pushed = next(ln for ln in lines if ln.startswith("doit push variant="))
    pulled = next(ln for ln in lines if ln.startswith("doit pull "))
    assert pushed.split()[2] == pulled.split()[2], (pushed, pulled)
    here = {"/tmp/orch-team-cache": str(tmp_path / "team-cache"),
            "/tmp/orch-teammate-store": str(tmp_path / "teammate-store")}
    moved = []
    for ln in lines:
        for old, new in here.items():
            ln = ln.replace(old, new)
        moved.append(ln)
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAX_JOBS", "VIRTUAL_ENV", "XDG_CONFIG_HOME") and not k.startswith("ORCH_")}
    env.update(ORCH_STORE=str(store), HOME=str(tmp_path / "home"), ORCH_NO_PROGRESS="1")
    res = run_lines(project, [". .venv/bin/activate", "doit build variant=release"], moved, env,
                    1200)
    out = res.output
    assert res.returncode == 0, f"README line failed: {res.failed_line}\n{out[-4000:]}"
    assert "Traceback" not in out, out[-4000:]
    assert re.search(r"^✓ write access", res.output, re.M), out[-3000:]
    teammate = tmp_path / "teammate-store" / "store"
    assert [p.name.split("-", 1)[1] for p in teammate.iterdir()] == ["demo-release"], out[-3000:]


def test_help_and_gc_keep_agree_with_the_readme():
    """The README's everyday block starts with `doit help`, which lists every verb the
    README's blocks use; its gc line states gc's real default keep."""
    from orchestrator.config import cli_vars

    everyday = [strip_comment(ln) for ln in readme_block("Everyday use")]
    team = [strip_comment(ln) for ln in readme_block("Team cache")]
    assert "doit help" in everyday
    used = {ln.split()[1] for ln in everyday + team if ln.startswith("doit ")}
    assert used <= set(cli_vars.VERBS) | {"help"}, used - set(cli_vars.VERBS)
    assert "cache-check" in used
    gc_line = next(ln for ln in readme_block("Everyday use") if ln.startswith("doit gc  "))
    assert f"keep={cli_vars.VARS['keep'].default} (the default)" in gc_line, gc_line
