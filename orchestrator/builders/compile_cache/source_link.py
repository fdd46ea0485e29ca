"""The path-free source (cmake builder): the build tree reaches the checkout through a link
inside it, so compile lines name the source the same way for every checkout."""
from __future__ import annotations

import os
from pathlib import Path

from orchestrator.fs import atomic_symlink

SOURCE_LINK = ".orch-src"  # <build tree>/.orch-src -> the checkout


def source_link(build_dir: Path, source_dir: Path) -> Path:
    """<build tree>/.orch-src -> the checkout: the compile lines then name the source by a
    path that is the same for every checkout, relative to the build tree (base_dir)."""
    link = build_dir / SOURCE_LINK
    build_dir.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() and os.readlink(link) == str(source_dir):
        return link
    atomic_symlink(source_dir, link)
    return link


def source_link_flags(link: Path, logical_source: str) -> list[str]:
    """Map the link (absolute, and as ccache's base_dir rewrite leaves it, relative) to the
    source's logical root, after the build tree's map: GCC applies the last matching map."""
    return [f"-ffile-prefix-map={link}={logical_source}",
            f"-ffile-prefix-map={SOURCE_LINK}={logical_source}"]
