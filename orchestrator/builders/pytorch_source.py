"""The tree a PyTorch build compiles: a per-build copy of a pinned source (its codegen writes
into the tree), and one build per such tree at a time."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

from filelock import FileLock

from orchestrator.builders.context import BuildContext
from orchestrator.errors import UserError
from orchestrator.fs import remove_tree, temp_sibling, write_atomic
from orchestrator.hashing import digest_of
from orchestrator.model.store_layout import StorePaths

SOURCE_COPY = "source"
SOURCE_COPY_STAMP = ".orch-source-copy.json"


def build_copy_of_source(ctx: BuildContext) -> BuildContext:
    """A pinned source is shared by every variant and must stay as unpacked: PyTorch's
    codegen writes into its source tree (version.h, Config.h, autograd/generated, __pycache__),
    so a pinned tree is built from a copy inside the build tree, made once per source identity
    (mtimes kept). So is a checkout's patched copy (`patch_checkouts`: it lives in the store's
    sources/ too), a new one per edit: the build tree's copy is then brought up to date
    (sync_copy), not replaced, so what configure and the build wrote into it stays (CMake does
    not configure again, and Config.h is configure's) and only what changed is rebuilt. A plain
    checkout builds in place, as `setup.py develop` would."""
    if builds_in_place(ctx):
        return ctx  # (a checkout's patched copy is in the store's sources/: copied like a pin)
    dest = ctx.build_dir / SOURCE_COPY
    stamp = ctx.build_dir / SOURCE_COPY_STAMP
    wanted = digest_of(ctx.plan.source.identity)
    old = json.loads(stamp.read_text()) if stamp.is_file() else {}
    if dest.is_dir() and old.get("digest") != wanted and old.get("from"):
        stamp.unlink()                       # a killed sync is done again, whole
        sync_copy(ctx.source_dir, dest, Path(old["from"]))
        write_atomic(stamp, json.dumps({"digest": wanted, "from": str(ctx.source_dir)}))
    elif not (dest.is_dir() and old.get("digest") == wanted):
        ctx.build_dir.mkdir(parents=True, exist_ok=True)
        tmp = temp_sibling(dest)  # .source.tmp-<pid>-<hex>: the one temp naming
        res = subprocess.run(["cp", "-a", "--reflink=auto", f"{ctx.source_dir}/.", str(tmp)],
                             capture_output=True, text=True)
        if res.returncode != 0:
            remove_tree(tmp)
            raise UserError(f"copying the pinned source into {ctx.build_dir} failed: "
                            f"{res.stderr.strip()[-200:]}")
        stamp.unlink(missing_ok=True)
        remove_tree(dest)
        os.rename(tmp, dest)
        write_atomic(stamp, json.dumps({"digest": wanted, "from": str(ctx.source_dir)}))
    return dataclasses.replace(ctx, source_dir=dest)


def builds_in_place(ctx: BuildContext) -> bool:
    """A plain checkout (not its patched copy): built where it is."""
    extra = ctx.plan.source.extra
    return bool(extra.get("checkout")) and not extra.get("patched_copy")


def source_lock(ctx: BuildContext) -> FileLock:
    """PyTorch's codegen writes into the tree it builds: one build per such tree at a time
    (a pinned source's per-build copy, or the checkout)."""
    key = hashlib.sha256(str(ctx.source_dir).encode()).hexdigest()[:16]
    locks = StorePaths(ctx.build_dir.parent.parent).locks
    locks.mkdir(parents=True, exist_ok=True)
    return FileLock(str(locks / f"pytorch-source-{key}.lock"))


def sync_copy(src: Path, dest: Path, previous: Path) -> None:
    """dest (a copy of `previous`, then built in) made a copy of src: each file or link of src
    whose size, mtime or target differs is copied (mtimes kept, beside then renamed); what
    `previous` had and src has not is removed. What the build wrote (files neither tree has:
    Config.h, version.h, functorch.so) stays. When `previous` is gone (gc), nothing is removed."""
    for dirpath, dirnames, filenames in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        (dest / rel).mkdir(exist_ok=True)
        for name in filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
            a, b = Path(dirpath) / name, dest / rel / name
            sa = a.lstat()
            try:
                sb = b.lstat()
                same = (sa.st_mode == sb.st_mode and sa.st_size == sb.st_size
                        and sa.st_mtime_ns == sb.st_mtime_ns
                        and (not a.is_symlink() or os.readlink(a) == os.readlink(b)))
            except FileNotFoundError:
                same = False
            if same:
                continue
            tmp = temp_sibling(b)
            if a.is_symlink():
                os.symlink(os.readlink(a), tmp)
            else:
                shutil.copy2(a, tmp)
            if b.is_dir() and not b.is_symlink():
                remove_tree(b)
            os.replace(tmp, b)
    if not previous.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(previous):
        rel = Path(dirpath).relative_to(previous)
        for name in filenames + dirnames:
            if not os.path.lexists(src / rel / name) and os.path.lexists(dest / rel / name):
                gone = dest / rel / name
                if gone.is_dir() and not gone.is_symlink():
                    remove_tree(gone)
                else:
                    gone.unlink()
        dirnames[:] = [d for d in dirnames if (src / rel / d).is_dir()]
