"""The set-up fetches every archive any recipe pins (.ci/pytorch-prereqs.sh →
orchestrator.sources.prefetch), so no build or test downloads one; an archive the registry
no longer serves is one line naming the recipe and the file."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO

from orchestrator.sources.archives import ARCHIVES_ENV, USER_ARCHIVES
from orchestrator.sources.prefetch import pinned_archives


def test_every_pinned_archive_is_in_the_setup_cache():
    """What bootstrap.sh left: each archive of each recipe, by name, with its pinned sha256."""
    dirs = [Path(d) for d in os.environ.get(ARCHIVES_ENV, "").split(os.pathsep) if d]
    dirs.append(USER_ARCHIVES.expanduser())
    pinned = pinned_archives(REPO / "recipes")
    files = {a.file for _, a in pinned}
    # Every overlay of both PyTorch recipes is among them (2.6's fmt 10.1.1 and cpp-httplib
    # were fetched at test time before).
    assert {"fmtlib_10.1.1+ds1.orig.tar.gz", "cpp-httplib_0.18.7.orig.tar.xz",
            "gloo_0.0~git20231202.5354032.orig.tar.xz", "pytorch_2.6.0+dfsg.orig.tar.xz",
            "pytorch_1.13.1+dfsg.orig.tar.xz", "fmtlib_9.1.0+ds1.orig.tar.gz"} <= files
    import hashlib
    for recipe, archive in pinned:
        found = [d / archive.file for d in dirs if (d / archive.file).is_file()]
        assert found, f"recipes/{recipe}.toml pins {archive.file}: not in {dirs} (run the set-up)"
        digest = hashlib.sha256(found[0].read_bytes()).hexdigest()
        assert digest == archive.sha256, (recipe, archive.file)


def test_a_version_no_longer_served_is_one_line_naming_recipe_and_file(tmp_path):
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    shutil.copy2(REPO / "recipes" / "demo.toml", recipes / "demo.toml")
    shutil.copytree(REPO / "recipes" / "demo", recipes / "demo")
    (recipes / "gone.toml").write_text(
        'description = "a pin the registry dropped"\n[source]\nkind = "archive"\n'
        'file = "fmtlib_0.0.1.orig.tar.gz"\nsha256 = "' + "0" * 64 + '"\n'
        'fetch = { apt_source = "fmtlib=0.0.1-1" }\n[build]\nsystem = "cmake"\n'
        '[variants.release]\nbuild_type = "Release"\n')
    dest = tmp_path / "archives"
    res = subprocess.run([sys.executable, "-m", "orchestrator.sources.prefetch", str(recipes),
                          str(dest)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("prefetch: recipes/gone.toml: fmtlib_0.0.1.orig.tar.gz: ")
    assert "fmtlib=0.0.1-1" in lines[0] and "Traceback" not in res.stderr
    # Nothing half-written: the cache holds no file and no scratch directory.
    assert sorted(p.name for p in dest.iterdir()) == []
