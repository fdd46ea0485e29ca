"""Split DWARF (a variant's `split_dwarf = true`, cmake and pytorch builds): each object keeps
a skeleton unit and its line table, the rest of its debug info goes to a .dwo beside it, so a
link copies a fraction of the bytes (a RelWithDebInfo libtorch_cpu.so is mostly DWARF, and its
link is most of an edit's wait). lldb-14 reads a skeleton's .dwo at <comp_dir>/<dwo name>, a
relative comp_dir taken from the library's own directory; gdb and lldb-14 do not apply a
source map to that path. So the compile lines name the build tree's directory DWO_DIR as the
comp_dir (BuildContext.prefix_map_flags), and after the install each installed ELF file's .dwo
files are copied from the build tree to <its directory>/DWO_DIR/<dwo name>: copied, not
linked, since the next compile rewrites the build tree's file; an unchanged one gets its
committed inode (BuildContext.keep_copy)."""
from __future__ import annotations

import struct
from pathlib import Path, PurePosixPath

from orchestrator.builders.context import BuildContext
from orchestrator.builders.process import BuildFailed
from orchestrator.model.logical_paths import DWO_DIR
from orchestrator.verify.dwarf import skeleton_units
from orchestrator.verify.elf import is_elf, read_elf


def place_dwo_files(ctx: BuildContext) -> int:
    """Copy the .dwo of every skeleton unit of every ELF file in the staged prefix next to it;
    how many were placed. A .dwo the build tree lacks fails the build, naming both."""
    prefix = ctx.prefix
    placed: set[Path] = set()
    for path in sorted(prefix.rglob("*")):
        rel = path.relative_to(prefix)
        if DWO_DIR in rel.parts or path.is_symlink() or not path.is_file() or not is_elf(path):
            continue
        try:
            info = read_elf(path, symbols=False)
            try:
                units = skeleton_units(path, info)
            finally:
                info.close()
        except (OSError, ValueError, IndexError, struct.error):
            continue  # not an ELF file this reader takes: verify reports what it cannot read
        for comp_dir, name in units:
            if comp_dir != DWO_DIR:  # not this variant's (a recipe's own -gsplit-dwarf):
                continue             # verify's debug-info check names what lldb cannot find
            dwo = PurePosixPath(name)
            if dwo.is_absolute() or ".." in dwo.parts or not dwo.parts:
                raise BuildFailed(f"split DWARF: {rel} names the .dwo {name!r}, not a path inside "
                                  "the build tree; build the objects from the build tree (CMake's "
                                  "Ninja generator does)")
            dest = path.parent / DWO_DIR / dwo
            if dest in placed:
                continue
            source = ctx.build_dir / dwo
            if not source.is_file():
                raise BuildFailed(f"split DWARF: {rel} names {name}, which the build tree "
                                  f"{ctx.build_dir} does not hold; an object compiled outside it "
                                  "(an external project) cannot be split: turn split_dwarf off "
                                  "for this recipe")
            ctx.keep_copy(source, dest.relative_to(ctx.stage).as_posix())
            placed.add(dest)
    return len(placed)
