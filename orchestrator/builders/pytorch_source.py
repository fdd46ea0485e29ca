"""The tree a PyTorch build compiles: a per-build copy of a pinned source (its codegen writes
into the tree), and one build per such tree at a time."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess

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
    (mtimes kept, so a re-copy rebuilds only what changed). So is a checkout's patched copy
    (`patch_checkouts`: it lives in the store's sources/ too). A plain checkout builds in
    place, as `setup.py develop` would."""
    if builds_in_place(ctx):
        return ctx  # (a checkout's patched copy is in the store's sources/: copied like a pin)
    dest = ctx.build_dir / SOURCE_COPY
    stamp = ctx.build_dir / SOURCE_COPY_STAMP
    wanted = digest_of(ctx.plan.source.identity)
    if not (dest.is_dir() and stamp.is_file() and json.loads(stamp.read_text()).get("digest") == wanted):
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
