"""The fixed-layout parts of an ELF file, unpacked with `struct` from a mapped file: the
header, the section header table and the GNU symbol-version tables.

These are the only parts verification needs beyond the symbol arrays (verify/elf.py); a
general ELF library (pyelftools) builds an object per field and cost verify more time to
import than to read torch's headers.
"""
from __future__ import annotations

import mmap
import struct
from collections.abc import Sequence
from dataclasses import dataclass

ELF_MAGIC = b"\x7fELF"
SHN_XINDEX = 0xFFFF
VER_FLG_BASE = 0x1

# The names pyelftools gave these fields (ElfInfo keeps them).
E_TYPES = {0: "ET_NONE", 1: "ET_REL", 2: "ET_EXEC", 3: "ET_DYN", 4: "ET_CORE"}
E_MACHINES = {3: "EM_386", 8: "EM_MIPS", 20: "EM_PPC", 21: "EM_PPC64", 22: "EM_S390",
              40: "EM_ARM", 62: "EM_X86_64", 183: "EM_AARCH64", 243: "EM_RISCV"}
OSABIS = {0: "ELFOSABI_SYSV", 3: "ELFOSABI_LINUX", 9: "ELFOSABI_FREEBSD"}

Buffer = mmap.mmap | bytes


@dataclass(frozen=True)
class ElfHeader:
    """The ELF header fields verification reads."""
    elfclass: int  # 32 | 64
    little_endian: bool
    osabi: str
    etype: str
    machine: str
    phoff: int
    phentsize: int
    phnum: int
    shoff: int
    shentsize: int
    shnum: int
    shstrndx: int

    @property
    def le(self) -> str:
        return "<" if self.little_endian else ">"

    @property
    def is64(self) -> bool:
        return self.elfclass == 64


def parse_header(buf: Buffer) -> ElfHeader:
    """The header at the start of buf; ValueError when it is not a well-formed ELF header."""
    if len(buf) < 52 or buf[:4] != ELF_MAGIC:
        raise ValueError("no ELF magic")
    cls, data, osabi = buf[4], buf[5], buf[7]
    if cls not in (1, 2) or data not in (1, 2):
        raise ValueError(f"bad EI_CLASS {cls} / EI_DATA {data}")
    le = "<" if data == 1 else ">"
    if cls == 2:
        if len(buf) < 64:
            raise ValueError("truncated ELF header")
        etype, machine, _v, _entry, phoff, shoff, _fl, _eh, phentsize, phnum, shentsize, shnum, \
            shstrndx = struct.unpack_from(le + "HHIQQQIHHHHHH", buf, 16)
    else:
        etype, machine, _v, _entry, phoff, shoff, _fl, _eh, phentsize, phnum, shentsize, shnum, \
            shstrndx = struct.unpack_from(le + "HHIIIIIHHHHHH", buf, 16)
    return ElfHeader(elfclass=64 if cls == 2 else 32, little_endian=data == 1,
                     osabi=OSABIS.get(osabi, f"ELFOSABI_{osabi}"),
                     etype=E_TYPES.get(etype, f"ET_{etype:#x}"),
                     machine=E_MACHINES.get(machine, f"EM_{machine}"), phoff=phoff,
                     phentsize=phentsize, phnum=phnum, shoff=shoff, shentsize=shentsize,
                     shnum=shnum, shstrndx=shstrndx)


def section_headers(h: ElfHeader, buf: Buffer) -> list[tuple[int, int, int, int, int, int, int]]:
    """(name, type, offset, size, flags, link, info) for every section header."""
    if not h.shoff:
        return []
    fmt = h.le + ("IIQQQQII" if h.is64 else "IIIIIIII")
    shnum = h.shnum
    if shnum == 0:  # the real count lives in section 0's sh_size
        shnum = struct.unpack_from(fmt, buf, h.shoff)[5]
    out = []
    for i in range(shnum):
        name, typ, flags, _addr, off, size, link, info = struct.unpack_from(
            fmt, buf, h.shoff + i * h.shentsize)
        out.append((name, typ, off, size, flags, link, info))
    return out


def names_index(h: ElfHeader, shdrs: Sequence[tuple[int, ...]]) -> int | None:
    """The index of the section-name string table (SHN_XINDEX: it is in section 0's link)."""
    idx = h.shstrndx
    if idx == SHN_XINDEX and shdrs:
        idx = shdrs[0][5]
    return idx if 0 < idx < len(shdrs) else None


def c_string(buf: Buffer, off: int) -> bytes:
    """The NUL-terminated string at off (string tables: .dynstr, .shstrtab, .debug_str)."""
    end = buf.find(b"\0", off)
    return buf[off:end]


def _name(buf: Buffer, strtab: int, off: int) -> str:
    return c_string(buf, strtab + off).decode(errors="replace")


def read_verdef(buf: Buffer, le: str, off: int, count: int, strtab: int) -> dict[int, str]:
    """SHT_GNU_verdef: version index -> the name it defines (the file's own base entry left
    out). `count` is the section's sh_info."""
    out: dict[int, str] = {}
    for _ in range(count):
        _ver, flags, ndx, cnt, _hash, aux, nxt = struct.unpack_from(le + "HHHHIII", buf, off)
        if cnt and not flags & VER_FLG_BASE:
            out[ndx] = _name(buf, strtab, struct.unpack_from(le + "I", buf, off + aux)[0])
        if not nxt:
            break
        off += nxt
    return out


def read_verneed(buf: Buffer, le: str, off: int, count: int,
                 strtab: int) -> list[tuple[str, list[tuple[int, str]]]]:
    """SHT_GNU_verneed: [(needed file, [(version index, version name), ...]), ...]."""
    out: list[tuple[str, list[tuple[int, str]]]] = []
    for _ in range(count):
        _ver, cnt, file_off, aux, nxt = struct.unpack_from(le + "HHIII", buf, off)
        versions = []
        a = off + aux
        for _ in range(cnt):
            _hash, _flags, other, name, anext = struct.unpack_from(le + "IHHII", buf, a)
            versions.append((other, _name(buf, strtab, name)))
            if not anext:
                break
            a += anext
        out.append((_name(buf, strtab, file_off), versions))
        if not nxt:
            break
        off += nxt
    return out
