"""`source=PATH` on PyTorch 2.x checkouts (issue 16, item 7b), on PyTorch-shaped miniatures
(recipes/pytorch/minitorch, real cmake/ninja/gcc, seconds): the tree's own version.txt (+ git
rev) is what TORCH_BUILD_VERSION says, whatever the recipe pins for its pinned tree; a recipe
with `patch_checkouts = true` applies its overlays (into empty or missing directories only)
and patches to a copy under the store, never to the checkout; a tree the builder cannot
handle is one line naming what was found and what is supported, exit 2, nothing changed.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from conftest import REPO, copy_project, run_doit

MINI = REPO / "recipes" / "pytorch" / "minitorch"
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]


def define_patch(cmakelists: str) -> str:
    """A patch on CMakeLists.txt adding a define the compile lines then carry."""
    old = cmakelists.splitlines(keepends=True)
    new = old[:2] + ["add_compile_definitions(ORCH_CHECKOUT_PATCHED=1)\n"] + old[2:]
    body = "".join(difflib.unified_diff(old, new, "a/CMakeLists.txt", "b/CMakeLists.txt"))
    return "orchestrator test: a define that shows the patch reached the build.\n" + body


def tar_dir(src: Path, dest: Path, arcname: str) -> str:
    with tarfile.open(dest, "w:gz") as tar:
        tar.add(src, arcname=arcname, filter=lambda ti: None if "__pycache__" in ti.name else ti)
    return hashlib.sha256(dest.read_bytes()).hexdigest()


def fingerprint(tree: Path) -> str:
    """Paths, modes, mtimes and contents, less .git/ (identity's `git status` refreshes the
    index's stat data, as any git command may)."""
    h = hashlib.sha256()
    for p in sorted(tree.rglob("*")):
        rel = p.relative_to(tree).as_posix()
        if rel == ".git" or rel.startswith(".git/"):
            continue
        if p.is_symlink():
            h.update(f"l {rel} {os.readlink(p)}\n".encode())
        elif p.is_file():
            h.update(f"f {rel} {p.stat().st_mode:o} {p.stat().st_mtime_ns} ".encode()
                     + hashlib.sha256(p.read_bytes()).digest())
        else:
            h.update(f"d {rel}\n".encode())
    return h.hexdigest()


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    """A project with recipe `mini2` (pinned: the minitorch tarball, version "0.1.0"; one
    overlay, one patch, patch_checkouts) and a git checkout of minitorch saying 2.6.0a0."""
    root = tmp_path_factory.mktemp("pytorch2-checkout")
    archives = root / "archives"
    archives.mkdir()
    sha = tar_dir(MINI, archives / "minitorch-0.1.0.tar.gz", "minitorch-0.1.0")
    extra = root / "extra-src"
    (extra / "include").mkdir(parents=True)
    (extra / "include" / "extra.h").write_text("#define ORCH_EXTRA 1\n")
    extra_sha = tar_dir(extra, archives / "extra-1.0.tar.gz", "extra-1.0")
    project = copy_project(root / "project")
    (project / "recipes" / "mini2" / "patches").mkdir(parents=True)
    (project / "recipes" / "mini2" / "patches" / "0001-define.patch").write_text(
        define_patch((MINI / "CMakeLists.txt").read_text()))
    overlay = f"""
[[source.overlays]]
path = "third_party/{{name}}"
file = "extra-1.0.tar.gz"
sha256 = "{extra_sha}"
"""
    (project / "recipes" / "mini2.toml").write_text(f"""
lock = "pytorch"
[source]
kind = "archive"
file = "minitorch-0.1.0.tar.gz"
sha256 = "{sha}"
patches = ["mini2/patches/0001-define.patch"]
patch_checkouts = true
{overlay.format(name="extra")}
{overlay.format(name="filled")}
[build]
system = "pytorch"
[build.pytorch]
version = "0.1.0"
python_extension = false
[variants.release]
build_type = "Release"
[variants.relwithdebinfo]
build_type = "RelWithDebInfo"
cflags = ["-gdwarf-4", "-fno-reorder-blocks-and-partition"]
""")
    checkout = root / "checkout"
    shutil.copytree(MINI, checkout, ignore=shutil.ignore_patterns("__pycache__"))
    (checkout / "version.txt").write_text("2.6.0a0\n")
    (checkout / "third_party" / "filled").mkdir(parents=True)
    (checkout / "third_party" / "filled" / "mine.h").write_text("// the checkout's own\n")
    (checkout / "third_party" / "extra").mkdir()  # an emptied submodule: the overlay fills it
    subprocess.run([*GIT, "init", "-q", str(checkout)], check=True)
    subprocess.run([*GIT, "-C", str(checkout), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(checkout), "commit", "-qm", "2.6-shaped"], check=True)
    rev = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True,
                         text=True, check=True).stdout.strip()
    return {"project": project, "store": root / "store", "root": root, "checkout": checkout,
            "rev": rev, "env": {"ORCH_ARCHIVES": str(archives)}}


def doit(two, *args: str):
    return run_doit(two["project"], *args, f"store={two['store']}", "substitute=0",
                    env=two["env"])


def built(two, *args: str) -> dict:
    res = doit(two, "build", "format=json", "variant=release", *args)
    assert res.returncode == 0, res.output[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_checkout_version_and_patched_copy(two):
    co = two["checkout"]
    before = fingerprint(co)
    art = Path(built(two, "recipe=mini2", f"source={co}")["path"])
    info = json.loads((art / "meta/pytorch.json").read_text())
    # The tree's own version (+git rev), not the recipe's pinned "0.1.0".
    assert info["torch_version"] == f"2.6.0a0+git{two['rev'][:7]}"
    assert info["defines"]["TORCH_BUILD_VERSION"] == info["torch_version"]
    # The patch reached the compile lines; the overlay filled the empty directory only.
    commands = (art / "meta/compile_commands.json").read_text()
    assert "ORCH_CHECKOUT_PATCHED=1" in commands
    manifest = json.loads((art / "manifest.json").read_text())
    ident = manifest["derivation"]["source"]
    assert ident["kind"] == "git-checkout" and ident["rev"] == two["rev"]
    assert [o["path"] for o in ident["overlays"]] == ["third_party/extra"]
    assert [p["name"] for p in ident["patches"]] == ["0001-define.patch"]
    copies = [d for d in (two["store"] / "sources").iterdir() if d.name.endswith("-mini2")]
    [copy] = copies
    assert (copy / "third_party/extra/include/extra.h").is_file()
    assert (copy / "third_party/filled/mine.h").is_file()
    assert not (copy / ".git").exists()
    assert "ORCH_CHECKOUT_PATCHED" in (copy / "CMakeLists.txt").read_text()
    # The checkout itself is untouched (content, modes, mtimes; no overlay, no build output).
    assert fingerprint(co) == before
    assert not any((co / "third_party" / "extra").iterdir())

    # An edit elsewhere: a new copy and id, the same build tree (incremental), and the
    # patched CMakeLists.txt keeps its mtime, so CMake does not configure again.
    # The build tree's copy is brought up to date, not replaced: c10/config.h, which configure
    # wrote into it, stays (no configure now), and a file the checkout deleted goes.
    (co / "c10" / "build_info.cpp").write_text((co / "c10" / "build_info.cpp").read_text()
                                               + "\n// edited\n")
    (co / "README.md").unlink()
    again = built(two, "recipe=mini2", f"source={co}")
    [tree] = (two["store"] / "build").glob("mini2-release-*")
    assert (tree / "source/c10/config.h").is_file()
    assert not (tree / "source/README.md").exists() and (tree / "source/version.txt").is_file()
    assert "// edited" in (tree / "source/c10/build_info.cpp").read_text()
    again_art = Path(again["path"])
    assert again_art != art
    info2 = json.loads((again_art / "meta/pytorch.json").read_text())
    assert info2["configured_now"] is False
    assert json.loads((again_art / "manifest.json").read_text())["derivation"]["source"][
        "diff_sha256"] != ident["diff_sha256"]
    subprocess.run(["git", "-C", str(co), "checkout", "-q", "--", "."], check=True)


def checkout_workspace(two, name: str, variant: str) -> tuple[Path, dict[str, dict]]:
    """A workspace switched to mini2 `variant` built from the checkout, with `doit vscode` run:
    its root and its launch configurations by name."""
    ws = two["root"] / name
    ws.mkdir(exist_ok=True)
    for args in (("switch", f"variant={variant}", "substitute=0"), ("vscode",)):
        res = run_doit(two["project"], *args, "recipe=mini2", f"source={two['checkout']}",
                       f"workspace={ws}", f"store={two['store']}", env=two["env"])
        assert res.returncode == 0, res.output[-3000:]
    launch = json.loads((ws / ".vscode/launch.json").read_text())
    return ws, {c["name"]: c for c in launch["configurations"]}


def test_the_debugger_maps_the_checkout_not_its_patched_copy(two):
    """Built from a checkout through its patched copy in the store, the workspace's debuggers
    map the debug info's source paths to the checkout first: the file open in the editor,
    where a click in the gutter sets the breakpoint (the pinned lldb-14 resolves it), and the
    file lldb shows at a stop."""
    co = two["checkout"]
    ws, configs = checkout_workspace(two, "ws-checkout", "relwithdebinfo")
    lldb_cfg = configs["orch: Python + C++ (lldb-14)"]
    (logical, first), (logical2, copy) = lldb_cfg["sourceMap"][:2]
    assert logical == logical2 == "/orch/src/mini2" and first == str(co), lldb_cfg["sourceMap"]
    assert Path(copy).parent == two["store"] / "sources" and copy.endswith("-mini2"), copy
    gdb_cfg = configs["orch: Python + C++ (gdb)"]
    assert gdb_cfg["sourceFileMap"]["/orch/src/mini2"] == str(co)
    [lib] = (ws / ".orch/profile").glob("**/libc10.so")
    line = 4
    assert "build_type()" in (co / "c10/build_info.cpp").read_text().splitlines()[line - 1]
    # A comment only the checkout has (as an unsaved-to-the-store edit would): lldb lists it.
    src = co / "c10/build_info.cpp"
    lines = src.read_text().splitlines(keepends=True)
    lines[line - 1] = lines[line - 1].rstrip("\n") + "  // the checkout's line\n"
    src.write_text("".join(lines))
    try:
        out = subprocess.run(
            [str(ws / ".orch/bin/lldb"), "-b", "-S", str(ws / ".lldbinit"), "-o", f"target create {lib}",
             "-o", f"breakpoint set -f {src} -l {line}", "-o", "source list -n c10::build_type -c 1"],
            capture_output=True, text=True, timeout=120)
    finally:
        subprocess.run(["git", "-C", str(co), "checkout", "-q", "--", "."], check=True)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    assert re.search(r"Breakpoint 1: where = libc10\.so`c10::build_type\(\).* at build_info\.cpp:4", text), text
    assert re.search(r"^\s+4\s+const char\* build_type\(\).*// the checkout's line$", text, re.M), text


def test_gc_keeps_the_source_tree_a_workspace_s_debuggers_show(two):
    """gc keeps one unpacked source per recipe, the newest; a workspace whose debuggers map
    to an older one (its artifact's patched copy) keeps that one too: deleting it left lldb
    there without the files it shows and with line breakpoints that never bind."""
    co = two["checkout"]
    ws, configs = checkout_workspace(two, "ws-gc", "release")
    cfg = configs["orch: Python + C++ (lldb-14)"]
    mapped = Path(cfg["sourceMap"][1][1])
    assert mapped.parent == two["store"] / "sources", cfg["sourceMap"]
    # A newer copy: the checkout edited and built again (no switch).
    build_info = co / "c10" / "build_info.cpp"
    build_info.write_text(build_info.read_text() + "\n// gc test\n")
    try:
        built(two, "recipe=mini2", f"source={co}")
    finally:
        subprocess.run(["git", "-C", str(co), "checkout", "-q", "--", "."], check=True)
    copies = sorted((p for p in (two["store"] / "sources").iterdir() if p.name.endswith("-mini2")),
                    key=lambda p: p.lstat().st_mtime)
    assert copies[-1] != mapped and mapped in copies, copies
    res = run_doit(two["project"], "gc", "dry_run=1", "format=json", f"store={two['store']}",
                   f"workspace={ws}", env=two["env"])
    assert res.returncode == 0, res.output[-3000:]
    doomed = {Path(d["path"]) for d in json.loads(res.stdout)["deleted"] if d["kind"] == "source"}
    assert mapped not in doomed and copies[-1] not in doomed, (mapped, doomed)


def test_recipe_without_patch_checkouts_builds_the_checkout_as_is(two):
    """recipes that do not ask (the 1.13.1 recipe) keep building the checkout in place."""
    recipe = (two["project"] / "recipes" / "mini2.toml").read_text()
    (two["project"] / "recipes" / "mini1.toml").write_text(
        recipe.replace("patch_checkouts = true\n", ""))
    co = two["checkout"]
    art = Path(built(two, "recipe=mini1", f"source={co}")["path"])
    ident = json.loads((art / "manifest.json").read_text())["derivation"]["source"]
    assert "patches" not in ident and "overlays" not in ident
    assert "ORCH_CHECKOUT_PATCHED" not in (art / "meta/compile_commands.json").read_text()
    info = json.loads((art / "meta/pytorch.json").read_text())
    assert info["torch_version"] == f"2.6.0a0+git{two['rev'][:7]}"
    shutil.rmtree(co / "build", ignore_errors=True)


def fake_tree(root: Path, name: str, version: str | None, setup: bool = True) -> Path:
    tree = root / name
    tree.mkdir()
    if version is not None:
        (tree / "version.txt").write_text(version + "\n")
    if setup:
        (tree / "setup.py").write_text("# PyTorch's driver would be here\n")
    (tree / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.18)\n")
    return tree


@pytest.mark.parametrize("name,version,setup,says", [
    ("no-version", None, True, "has no version.txt"),
    ("no-setup", "2.6.0", False, "has no setup.py"),
    ("neither", None, False, "has no version.txt and no setup.py"),
    ("three", "3.0.0a0", True, "is PyTorch 3.0.0a0 (version.txt)"),
    ("ancient", "0.4.1", True, "is PyTorch 0.4.1 (version.txt)"),
    ("garbage", "main", True, "says 'main', not a version"),
])
def test_unsupported_tree_is_one_line(two, name, version, setup, says):
    tree = fake_tree(two["root"], f"fake-{name}", version, setup)
    before = fingerprint(tree)
    sources = two["store"] / "sources"
    had = sorted(p.name for p in sources.iterdir()) if sources.is_dir() else []
    for recipe in ("recipe=pytorch2", "recipe=mini2"):
        res = doit(two, "build", recipe, "variant=release", f"source={tree}", "targets=c10")
        assert res.returncode == 2, res.output[-2000:]
        lines = [ln for ln in res.output.strip().splitlines() if ln.strip()]
        assert len(lines) == 1 and "Traceback" not in res.output, res.output
        assert says in lines[0] and str(tree) in lines[0], lines[0]
        assert "PyTorch 1.x and 2.x" in lines[0], lines[0]
    assert fingerprint(tree) == before
    now = sorted(p.name for p in sources.iterdir()) if sources.is_dir() else []
    assert now == had


def test_patch_that_does_not_apply_to_the_checkout(two, tmp_path):
    """A checkout whose CMakeLists.txt differs from what the patch expects: one line naming
    the patch and the checkout, exit 2, the checkout and the store's sources unchanged."""
    co = tmp_path / "other"
    shutil.copytree(MINI, co, ignore=shutil.ignore_patterns("__pycache__"))
    (co / "version.txt").write_text("2.5.1\n")
    lines = (co / "CMakeLists.txt").read_text().splitlines(keepends=True)
    (co / "CMakeLists.txt").write_text("".join(lines[:1] + ["# rewritten here\n"] + lines[2:]))
    before = fingerprint(co)
    sources = two["store"] / "sources"
    had = sorted(p.name for p in sources.iterdir()) if sources.is_dir() else []
    res = doit(two, "build", "recipe=mini2", "variant=release", f"source={co}")
    assert res.returncode == 2, res.output[-2000:]
    lines = [ln for ln in res.output.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    assert "0001-define.patch does not apply to the checkout" in lines[0], lines[0]
    assert fingerprint(co) == before
    assert (sorted(p.name for p in sources.iterdir()) if sources.is_dir() else []) == had
