"""A shared library's link interface: what another object's link and load read of it (its
soname, needs, versions and exported symbols), not its code, addresses or debug info. A
library relinked after an edit of a function body has the same interface; builders/relink.py
and the verdict cache (verify/cache.py) rely on that."""
from __future__ import annotations

import hashlib
import json
import mmap
import struct
from pathlib import Path

from orchestrator.verify.elf import (
    SHN_UNDEF,
    SHT_DYNSYM,
    STB_GLOBAL,
    STB_GNU_UNIQUE,
    STB_WEAK,
    STT_FILE,
    STT_SECTION,
    ElfInfo,
)
from orchestrator.verify.elf_header import c_string, parse_header, section_headers


def link_interface(info: ElfInfo) -> str:
    """sha256 of what another object's link and load see of this one: its type and platform,
    soname, DT_NEEDED, search paths, version definitions and every exported name with its
    versions. Code, addresses and debug info are not in it: a library relinked after an edit
    of a function body has the same interface."""
    h = hashlib.sha256(json.dumps([
        info.etype, list(info.platform or ()), info.soname, info.needed, info.rpath,
        info.runpath, info.has_verdef, sorted(info.verdefs)]).encode() + b"\0")
    defined = info.defined
    for name in sorted(defined):
        h.update(name + b"@" + b",".join(b"\1" if v is None else v.encode()
                                        for v in defined[name]) + b"\n")
    return h.hexdigest()


STT_OBJECT, STT_TLS = 1, 6


def export_kinds(path: Path) -> bytes:
    """What a linker reads of each exported symbol besides its name and version: type, binding
    and visibility, and for data (STT_OBJECT, STT_TLS) the size a copy relocation takes. One
    sorted line per defined dynamic symbol; a function's size, which changes with any edit of
    its body, is left out. Read in bulk from an mmap like `_read_symbols`."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        h = parse_header(mm)
        shdrs = section_headers(h, mm)
        dynsym = next((s for s in shdrs if s[1] == SHT_DYNSYM), None)
        if dynsym is None:
            return b""
        _n, _t, off, size, _f, link, _i = dynsym
        str_off = shdrs[link][2]
        fmt = h.le + ("IBBHQQ" if h.is64 else "IIIBBH")
        lines = []
        for row in struct.iter_unpack(fmt, mm[off:off + size - size % struct.calcsize(fmt)]):
            name, info, other, shndx, sz = ((row[0], row[1], row[2], row[3], row[5]) if h.is64
                                            else (row[0], row[3], row[4], row[5], row[2]))
            if shndx == SHN_UNDEF or not name or (info & 0xF) in (STT_SECTION, STT_FILE) \
                    or (info >> 4) not in (STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE):
                continue
            kind = info & 0xF
            lines.append(b"%s %d %d %d" % (c_string(mm, str_off + name), info, other & 3,
                                           sz if kind in (STT_OBJECT, STT_TLS) else 0))
    return b"\n".join(sorted(lines))
