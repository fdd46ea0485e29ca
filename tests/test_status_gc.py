"""`doit status` (generations, per-artifact date/build time/source/size, toolchains and build
trees with sizes) and `doit gc` (dry_run=1, bytes freed, toolchains, build trees, sources,
archives nothing needs)."""
from __future__ import annotations

import json
import os
from pathlib import Path

from orchestrator.memo.plan_memo import memo_artifact


def snapshot(root: Path) -> set[str]:
    return {os.path.join(d, n) for d, ds, fs in os.walk(root) for n in ds + fs}


def test_status_and_gc(doit, store: Path, project: Path) -> None:  # noqa: ANN001
    for v in ("release", "relwithdebinfo"):
        res = doit("switch", f"variant={v}", f"workspace={project}")
        assert res.returncode == 0, res.output
    assert doit("rollback", f"workspace={project}").returncode == 0

    res = doit("status", f"workspace={project}", "format=json")
    assert res.returncode == 0, res.output
    data = json.loads(res.stdout)
    gens = data["generations"]
    assert [g["generation"] for g in gens] == [1, 2]
    assert [g["current"] for g in gens] == [True, False]  # rolled back to 1
    assert gens[0]["artifact"].endswith("-demo-release") and gens[0]["date"]
    assert {a["variant"] for a in data["artifacts"]} == {"release", "relwithdebinfo"}
    for a in data["artifacts"]:
        assert a["date"] and a["build_s"] > 0 and a["size"] > 0
        assert a["source"].startswith("path ")
    assert data["toolchains"] and all(t["size"] > 0 for t in data["toolchains"])
    assert {b["name"].rsplit("-", 1)[0] for b in data["build_trees"]} == {
        "demo-release", "demo-relwithdebinfo"}
    human = doit("status", f"workspace={project}")
    assert human.returncode == 0 and "generations of" in human.stderr
    assert "toolchain " in human.stderr and "build tree demo-release" in human.stderr

    # things nothing needs: a toolchain, a gone variant's build tree, a source, an archive
    junk = [store / "toolchains" / ("f" * 32), store / "build" / "demo-gone-0123abcd",
            store / "sources" / "0123456789abcdef-norecipe", store / "archives" / "old.tar.gz"]
    for j in junk[:3]:
        j.mkdir(parents=True)
        (j / "blob").write_bytes(b"x" * 100_000)
    junk[3].parent.mkdir(parents=True, exist_ok=True)
    junk[3].write_bytes(b"y" * 100_000)
    # the quick check's copy of the junk toolchain's manifest goes with it; the used one stays
    [used_copy] = (store / "cache" / "toolchain-quick").iterdir()
    junk.append(store / "cache" / "toolchain-quick" / f"quick-{'f' * 32}.marshal")
    junk[4].write_bytes(b"z")

    # the plan memos (plan_memo.py) of the artifact gc deletes go with it; the others stay
    memos = {p.name: memo_artifact(p) for p in (store / "cache" / "plan-memo").iterdir()}
    doomed_memos = {n: "plan memo" for n, a in memos.items() if Path(a).name == gens[1]["artifact"]}
    kept_memos = set(memos) - set(doomed_memos)
    assert doomed_memos and kept_memos, memos

    before = snapshot(store)
    res = doit("gc", "dry_run=1", "keep=0", f"workspace={project}", "format=json")
    assert res.returncode == 0, res.output
    plan = json.loads(res.stdout)
    assert snapshot(store) == before  # a dry run changes nothing
    deleted = {Path(d["path"]).name: d["kind"] for d in plan["deleted"]}
    assert deleted == {"f" * 32: "toolchain", "demo-gone-0123abcd": "build tree",
                       "0123456789abcdef-norecipe": "source", "old.tar.gz": "archive",
                       junk[4].name: "toolchain check copy", **doomed_memos,
                       gens[1]["artifact"]: "artifact"}, deleted
    assert plan["freed_bytes"] >= 400_000

    res = doit("gc", "keep=0", f"workspace={project}")
    assert res.returncode == 0, res.output
    assert "MB freed" in res.stderr
    assert not any(j.exists() for j in junk)
    assert not (store / "store" / gens[1]["artifact"]).exists()
    assert (store / "store" / gens[0]["artifact"]).is_dir()  # the current one stays
    assert len(list((store / "toolchains").iterdir())) == 1  # the lock's toolchain stays
    assert used_copy.is_file()
    assert {p.name for p in (store / "cache" / "plan-memo").iterdir()} == kept_memos
    assert {p.name.rsplit("-", 1)[0] for p in (store / "build").iterdir()} == {
        "demo-release", "demo-relwithdebinfo"}
