"""Read what verification needs from an ELF file, without running it or reading it whole.

The headers and version tables are unpacked in verify/elf_header.py; the big arrays (.dynsym,
.dynstr, .gnu.version) are read in bulk from an mmap of the file with `struct`, so a 500 MB
library costs only the pages of those sections. Symbol names stay bytes; they are decoded only
for messages. DWARF is read in verify/dwarf.py, CUDA fatbins in verify/fatbin.py.
"""
from __future__ import annotations

import mmap
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.verify.elf_header import (
    ELF_MAGIC,
    ElfHeader,
    c_string,
    names_index,
    parse_header,
    read_verdef,
    read_verneed,
    section_headers,
)
from orchestrator.verify.gnuhash import GnuHashIndex

SHN_UNDEF = 0
STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 1, 2, 10
STT_SECTION, STT_FILE = 3, 4
VERSYM_HIDDEN = 0x8000
SHF_COMPRESSED = 0x800


@dataclass(frozen=True)
class Undefined:
    """A non-weak undefined dynamic symbol and the version it asks for (if any)."""
    name: bytes
    version: str | None
    version_file: str | None


def header_platform(path: Path) -> tuple[int, int, int] | None:
    """(EI_CLASS, EI_DATA, e_machine) from the first 20 bytes; None if not an ELF file."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return None
    if len(head) < 20 or head[:4] != ELF_MAGIC:
        return None
    order = "<" if head[5] == 1 else ">"
    return (head[4], head[5], struct.unpack_from(order + "H", head, 18)[0])


@dataclass(eq=False)
class ElfInfo:
    """The facts of one ELF file that resolution and the rules use."""
    path: Path
    elfclass: int
    machine: str
    little_endian: bool
    osabi: str
    etype: str
    soname: str | None = None
    needed: list[str] = field(default_factory=list)
    rpath: list[str] = field(default_factory=list)
    runpath: list[str] = field(default_factory=list)
    interp: str | None = None
    # name -> versions it is defined with (None = unversioned); loaded on first use of
    # `defined` when a .gnu.hash index answers `defines()` without it.
    _defined: dict[bytes, tuple[str | None, ...]] | None = None
    index: GnuHashIndex | None = None
    undefined: list[Undefined] = field(default_factory=list)
    has_verdef: bool = False
    verdefs: set[str] = field(default_factory=set)  # version names this object defines
    # version names this object needs, per needed file: {"libc.so.6": {"GLIBC_2.14", ...}}
    version_needs: dict[str, set[str]] = field(default_factory=dict)
    sections: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # off, size, flags
    platform: tuple[int, int, int] | None = None  # what ld.so compares: class, order, machine

    @property
    def defined(self) -> dict[bytes, tuple[str | None, ...]]:
        """Every exported definition: name -> versions (decodes the whole .dynsym once)."""
        if self._defined is None:
            self._defined = read_elf(self.path, full=True)._defined or {}
        return self._defined

    @defined.setter
    def defined(self, value: dict[bytes, tuple[str | None, ...]]) -> None:
        self._defined = value

    def close(self) -> None:
        """Unmap the file if a lookup mapped it."""
        if self.index is not None:
            self.index.close()

    def defines(self, name: bytes, version: str | None, h: int | None = None) -> bool:
        """True when this object satisfies a reference to name (at version, if given). `h`:
        see GnuHashIndex.versions."""
        if self._defined is None and self.index is not None:
            versions = self.index.versions(name, h)
        else:
            versions = self.defined.get(name)
        if versions is None:
            return False
        if version is None or not self.has_verdef:
            return True
        # ld.so accepts an unversioned definition for a versioned reference.
        return version in versions or None in versions


def is_elf(path: Path) -> bool:
    """True for a regular file that starts with the ELF magic."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == ELF_MAGIC
    except OSError:
        return False


DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH = 1, 14, 15, 29
SHT_DYNAMIC, SHT_DYNSYM, SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = 6, 11, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
SHT_GNU_HASH = 0x6FFFFFF6


def read_elf(path: Path, *, symbols: bool = True, full: bool = False) -> ElfInfo:
    """Parse one ELF file's dynamic facts (and its dynamic symbols when `symbols`).

    With a .gnu.hash section (and not `full`), only the undefined symbols are decoded (they
    precede the hashed ones in .dynsym); definitions are then looked up through the hash.
    Everything is unpacked with `struct` from an mmap of the file.
    """
    with open(path, "rb") as f:
        try:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file cannot be mapped
            raise ValueError(f"{path}: not a readable ELF file (empty)") from None
        with mm:
            try:
                h = parse_header(mm)
                info = ElfInfo(path=path, elfclass=h.elfclass, machine=h.machine,
                               little_endian=h.little_endian, osabi=h.osabi, etype=h.etype)
                info.platform = header_platform(path)
                _read_tables(h, mm, info, symbols, full)
            except (ValueError, struct.error, IndexError) as e:
                raise ValueError(f"{path}: not a readable ELF file ({e})") from None
    return info


def _read_tables(h: ElfHeader, mm: mmap.mmap, info: ElfInfo, symbols: bool, full: bool) -> None:
    le, is64 = h.le, h.is64
    shdrs = section_headers(h, mm)
    names_at = names_index(h, shdrs)
    names_off = shdrs[names_at][2] if names_at is not None else None
    by_type: dict[int, int] = {}
    for i, (name_i, typ, off, size, flags, _link, _info) in enumerate(shdrs):
        name = c_string(mm, names_off + name_i).decode(errors="replace") if names_off is not None else ""
        info.sections[name] = (off, size, flags)
        by_type.setdefault(typ, i)
    info.interp = _interp(h, mm)
    if SHT_DYNAMIC in by_type:
        _read_dynamic(mm, shdrs, by_type[SHT_DYNAMIC], le, is64, info)
    if symbols and SHT_DYNSYM in by_type:
        _read_symbols(mm, shdrs, by_type, le, is64, info, full)


def _interp(h: ElfHeader, mm: mmap.mmap) -> str | None:
    """PT_INTERP's path, from the program headers."""
    fmt = h.le + ("IIQQQQQQ" if h.is64 else "IIIIIIII")
    for i in range(h.phnum):
        ph = struct.unpack_from(fmt, mm, h.phoff + i * h.phentsize)
        if ph[0] == 3:  # PT_INTERP
            off, size = (ph[2], ph[5]) if h.is64 else (ph[1], ph[4])
            return bytes(mm[off:off + size]).rstrip(b"\0").decode(errors="replace")
    return None


def _read_dynamic(mm: mmap.mmap, shdrs: Sequence[tuple[int, ...]], idx: int, le: str, is64: bool,
                  info: ElfInfo) -> None:
    _n, _t, off, size, _f, link, _i = shdrs[idx]
    stroff = shdrs[link][2]
    fmt = le + ("qQ" if is64 else "iI")
    for tag, val in struct.iter_unpack(fmt, mm[off:off + size - size % struct.calcsize(fmt)]):
        if tag == 0:
            break
        if tag == DT_NEEDED:
            info.needed.append(c_string(mm, stroff + val).decode())
        elif tag == DT_SONAME:
            info.soname = c_string(mm, stroff + val).decode()
        elif tag == DT_RPATH:
            info.rpath = c_string(mm, stroff + val).decode().split(":")
        elif tag == DT_RUNPATH:
            info.runpath = c_string(mm, stroff + val).decode().split(":")


def _read_symbols(mm: mmap.mmap, shdrs: Sequence[tuple[int, ...]], by_type: dict[int, int],
                  le: str, is64: bool, info: ElfInfo, full: bool) -> None:
    _n, _t, so, ss, _f, link, _i = shdrs[by_type[SHT_DYNSYM]]
    if ss == 0:
        return
    verdef_names: dict[int, str] = {}
    verneed: dict[int, tuple[str, str]] = {}
    if SHT_GNU_VERDEF in by_type:
        info.has_verdef = True
        _n, _t, off, _s, _f, vlink, count = shdrs[by_type[SHT_GNU_VERDEF]]
        verdef_names = read_verdef(mm, le, off, count, shdrs[vlink][2])
        info.verdefs.update(verdef_names.values())
    if SHT_GNU_VERNEED in by_type:
        _n, _t, off, _s, _f, vlink, count = shdrs[by_type[SHT_GNU_VERNEED]]
        for file, versions in read_verneed(mm, le, off, count, shdrs[vlink][2]):
            needs = info.version_needs.setdefault(file, set())
            for index, name in versions:
                verneed[index] = (name, file)
                needs.add(name)
    _sn, _st, str_off, str_size, _sf, _sl, _si = shdrs[link]
    entsize = 24 if is64 else 16
    count = ss // entsize
    versym_off = shdrs[by_type[SHT_GNU_VERSYM]][2] if SHT_GNU_VERSYM in by_type else None
    if not full and SHT_GNU_HASH in by_type and shdrs[by_type[SHT_GNU_HASH]][5] == by_type[SHT_DYNSYM]:
        hash_off = shdrs[by_type[SHT_GNU_HASH]][2]
        header = struct.unpack_from(le + "IIII", mm, hash_off)
        info.index = GnuHashIndex(info.path, is64=is64, le=le, hash_off=hash_off, dynsym_off=so,
                                  dynstr_off=str_off, versym_off=versym_off,
                                  verdef_names=verdef_names, header=header)
        count = min(count, header[1])  # undefined symbols all precede symoffset
    if versym_off is not None:
        vers = struct.unpack_from(f"{le}{count}H", mm, versym_off)
    else:
        vers = (1,) * count
    # Column views of the symbol array (no per-symbol struct parsing): 32-bit words.
    words = memoryview(mm)[so:so + count * entsize].cast("I") if le == "<" or not is64 else None
    if words is not None and is64:
        names = words[0::6].tolist()
        meta = words[1::6].tolist()  # st_info | st_other << 8 | st_shndx << 16
        words.release()
    else:
        fmt = le + ("IBBHQQ" if is64 else "IIIBBH")
        rows = list(struct.iter_unpack(fmt, mm[so:so + count * entsize]))
        if words is not None:
            words.release()
        if is64:
            names = [r[0] for r in rows]
            meta = [r[1] | r[2] << 8 | r[3] << 16 for r in rows]
        else:
            names = [r[0] for r in rows]
            meta = [r[3] | r[4] << 8 | r[5] << 16 for r in rows]
    # Every string of .dynstr by offset, split once in C (only when all names are decoded);
    # suffix-shared names fall back to find().
    strtab = mm[str_off:str_off + str_size] if info.index is None else b""
    by_off: dict[int, bytes] = {}
    pos = 0
    for piece in strtab.split(b"\0") if strtab else ():
        by_off[pos] = piece
        pos += len(piece) + 1
    # One pass over the columns sorts symbols into undefined / unversioned / versioned.
    und: list[int] = []
    plain: list[int] = []
    versioned: list[int] = []
    for i in range(1, count):
        m = meta[i]
        if m >> 16 == SHN_UNDEF:
            if (m & 0xF0) == STB_GLOBAL << 4:
                und.append(i)
            continue
        bind = (m & 0xFF) >> 4
        if (bind == STB_GLOBAL or bind == STB_WEAK or bind == STB_GNU_UNIQUE) \
                and (m & 0xF) not in (STT_SECTION, STT_FILE) and ((m >> 8) & 3) not in (1, 2):
            v = vers[i]
            if v == 1:
                plain.append(names[i])
            elif v:  # 0 is local
                versioned.append(i)
    get = by_off.get

    def name_at(off: int) -> bytes:
        got = get(off)
        if got is not None:
            return got
        start = str_off + off
        return mm[start:mm.find(b"\0", start)]

    defined: dict[bytes, tuple[str | None, ...]] | None = None
    if info.index is None:
        defined = dict.fromkeys([get(o) or name_at(o) for o in plain], (None,))
    if defined is not None:
        for i in versioned:
            sym = name_at(names[i])
            ver = verdef_names.get(vers[i] & 0x7FFF)
            prev = defined.get(sym)
            defined[sym] = (ver,) if prev is None else prev + (ver,)
        defined.pop(b"", None)
    undefined: list[Undefined] = []
    for i in und:
        sym = name_at(names[i])
        if not sym:
            continue
        need = verneed.get(vers[i] & 0x7FFF)
        undefined.append(Undefined(sym, need[0] if need else None, need[1] if need else None))
    info._defined = defined
    info.undefined = undefined


def read_section(path: Path, info: ElfInfo, name: str, limit: int | None = None) -> bytes | None:
    """The bytes of a section (decompressed when SHF_COMPRESSED), at most `limit` raw bytes."""
    if name not in info.sections:
        return None
    off, size, flags = info.sections[name]
    with open(path, "rb") as f:
        f.seek(off)
        data = f.read(size if limit is None else min(size, limit))
    if flags & SHF_COMPRESSED and limit is None:
        hdr = struct.calcsize("<IIQQ") if info.elfclass == 64 else 12
        data = zlib.decompress(data[hdr:])
    return data
