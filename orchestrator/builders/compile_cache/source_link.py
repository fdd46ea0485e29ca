"""The path-free source (cmake builder): the build tree reaches the checkout through a link
inside it, so compile lines name the source the same way for every checkout."""
from __future__ import annotations

import os
from pathlib import Path

from orchestrator.fs import atomic_symlink

SOURCE_LINK = ".orch-src"  # <build tree>/.orch-src -> the checkout


def source_link(build_dir: Path, source_dir: Path, name: str = SOURCE_LINK) -> Path:
    """<build tree>/<name> (.orch-src) -> the checkout: the compile lines then name the source
    by a path that is the same for every checkout, relative to the build tree (base_dir).
    The PyTorch builder names it `source`, as its copy of a pinned tree: ccache rewrites a
    path under base_dir relative to the build tree, so a pinned tree's copy and a checkout's
    link both read `source/...` and a checkout of the pinned tree hits its entries (both map
    it to `/orch/src/<recipe>`, so the objects agree: BuildContext.prefix_map_flags)."""
    link = build_dir / name
    build_dir.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() and os.readlink(link) == str(source_dir):
        return link
    atomic_symlink(source_dir, link)
    return link


def source_link_flags(link: Path, logical_source: str) -> list[str]:
    """Map the link (absolute, and as ccache's base_dir rewrite leaves it, relative) to the
    source's logical root, after the build tree's map: GCC applies the last matching map."""
    return [f"-ffile-prefix-map={link}={logical_source}",
            f"-ffile-prefix-map={link.name}={logical_source}"]
