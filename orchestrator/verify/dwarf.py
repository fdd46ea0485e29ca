"""A minimal DWARF reader: which debug sections an object carries and the DW_AT_producer
(compiler and flags) of its first compile units, decoding only each unit's first DIE."""
from __future__ import annotations

import mmap
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.verify.elf import SHF_COMPRESSED, ElfInfo, read_section
from orchestrator.verify.elf_header import Buffer, c_string

DW_AT_PRODUCER = 0x25


@dataclass(frozen=True)
class DebugFacts:
    """What DWARF says about how an object was compiled."""
    has_debug_info: bool
    has_debug_line: bool
    producers: tuple[str, ...]


def debug_facts(path: Path, info: ElfInfo, max_units: int = 64) -> DebugFacts:
    """Presence of .debug_info/.debug_line and the DW_AT_producer of the first compile units
    (max_units=0: presence only, nothing decoded)."""
    has_info = ".debug_info" in info.sections and info.sections[".debug_info"][1] > 0
    has_line = ".debug_line" in info.sections and info.sections[".debug_line"][1] > 0
    producers: list[str] = []
    if has_info and max_units > 0:
        try:
            producers = _producers(path, info, max_units)
        except (struct.error, ValueError, IndexError, zlib.error):
            producers = []
    return DebugFacts(has_info, has_line, tuple(dict.fromkeys(producers)))


def _uleb(buf: Buffer, p: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[p]
        p += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return result, p


def _producers(path: Path, info: ElfInfo, max_units: int) -> list[str]:
    """Walk compile-unit headers and decode only each unit's first DIE up to DW_AT_producer."""
    off, size, flags = info.sections[".debug_info"]
    compressed = bool(flags & SHF_COMPRESSED)
    abbrev = read_section(path, info, ".debug_abbrev") or b""
    strs: dict[str, bytes] = {}

    def string_at(sec: str, o: int) -> str:
        if sec not in strs:
            strs[sec] = read_section(path, info, sec) or b""
        return c_string(strs[sec], o).decode(errors="replace")

    out: list[str] = []
    with open(path, "rb") as f:
        if compressed:
            dinfo: Buffer = read_section(path, info, ".debug_info") or b""
            base = 0
            total = len(dinfo)
        else:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            dinfo, base, total = mm, off, size
        try:
            p = 0
            for _ in range(max_units):
                if p + 11 > total:
                    break
                q = base + p
                length = struct.unpack_from("<I", dinfo, q)[0]
                off64 = length == 0xFFFFFFFF
                if off64:
                    length = struct.unpack_from("<Q", dinfo, q + 4)[0]
                    q += 12
                    unit_end = p + 12 + length
                else:
                    q += 4
                    unit_end = p + 4 + length
                osz = 8 if off64 else 4
                version = struct.unpack_from("<H", dinfo, q)[0]
                q += 2
                if version >= 5:
                    unit_type, addr_size = dinfo[q], dinfo[q + 1]
                    q += 2
                    abbr_off = struct.unpack_from("<Q" if off64 else "<I", dinfo, q)[0]
                    q += osz
                    if unit_type in (4, 5):  # skeleton/split: dwo id
                        q += 8
                    elif unit_type in (2, 6):  # type units: signature + offset
                        q += 8 + osz
                else:
                    abbr_off = struct.unpack_from("<Q" if off64 else "<I", dinfo, q)[0]
                    q += osz
                    addr_size = dinfo[q]
                    q += 1
                producer = _first_die_producer(dinfo, q, abbrev, abbr_off, addr_size, osz, string_at)
                if producer:
                    out.append(producer)
                p = unit_end
        finally:
            if not compressed:
                mm.close()
    return out


_FIXED = {0x0b: 1, 0x05: 2, 0x06: 4, 0x07: 8, 0x0c: 1, 0x11: 1, 0x12: 2, 0x13: 4, 0x14: 8,
          0x20: 8, 0x25: 1, 0x26: 2, 0x27: 3, 0x28: 4, 0x29: 1, 0x2a: 2, 0x2b: 3, 0x2c: 4,
          0x1e: 16, 0x19: 0, 0x21: -1}


def _skip_abbrev_attrs(abbrev: bytes, a: int) -> int:
    """Past one abbreviation's (attribute, form) pairs and their 0, 0 end. GCC numbers the
    compile unit's abbreviation last, so every unit's whole table is walked: one-byte
    values (nearly all of them) are read without a call."""
    while True:
        at = abbrev[a]
        if at < 0x80:
            a += 1
        else:
            at, a = _uleb(abbrev, a)
        form = abbrev[a]
        if form < 0x80:
            a += 1
        else:
            form, a = _uleb(abbrev, a)
        if form == 0x21:  # implicit_const: its value follows
            _, a = _uleb(abbrev, a)
        elif at == 0 and form == 0:
            return a


def _first_die_producer(dinfo: Buffer, q: int, abbrev: bytes, abbr_off: int, addr_size: int,
                        osz: int, string_at: Callable[[str, int], str]) -> str | None:
    code, q = _uleb(dinfo, q)
    a = abbr_off
    while True:  # find the abbreviation with this code
        acode, a = _uleb(abbrev, a)
        if acode == 0:
            return None
        _tag, a = _uleb(abbrev, a)
        a += 1  # children flag
        if acode == code:
            break
        a = _skip_abbrev_attrs(abbrev, a)
    while True:
        at, a = _uleb(abbrev, a)
        form, a = _uleb(abbrev, a)
        if form == 0x21:  # implicit_const carries its value in the abbreviation
            _, a = _uleb(abbrev, a)
        if at == 0 and form == 0:
            return None
        if at == DW_AT_PRODUCER:
            if form == 0x08:  # string
                return c_string(dinfo, q).decode(errors="replace")
            if form == 0x0e:  # strp
                return string_at(".debug_str", int(struct.unpack_from("<Q" if osz == 8 else "<I", dinfo, q)[0]))
            if form == 0x1f:  # line_strp
                return string_at(".debug_line_str", int(struct.unpack_from("<Q" if osz == 8 else "<I", dinfo, q)[0]))
            return None  # strx forms need .debug_str_offsets (split DWARF): not produced here
        q = _skip_form(dinfo, q, form, addr_size, osz)


def _skip_form(dinfo: Buffer, q: int, form: int, addr_size: int, osz: int) -> int:
    if form == 0x01:  # addr
        return q + addr_size
    if form in (0x0e, 0x1f, 0x17, 0x10, 0x1d):  # strp, line_strp, sec_offset, ref_addr, strp_sup
        return q + osz
    if form == 0x08:
        return dinfo.find(b"\0", q) + 1
    if form in (0x0f, 0x15, 0x1a, 0x1b, 0x22, 0x23, 0x0d):  # udata/ref_udata/strx/addrx/...
        _, q = _uleb(dinfo, q)
        return q
    if form in (0x0a, 0x18, 0x09):  # block1? exprloc, block
        if form == 0x0a:
            n = dinfo[q]
            return q + 1 + n
        n, q = _uleb(dinfo, q)
        return q + n
    if form == 0x03:
        return q + 2 + int(struct.unpack_from("<H", dinfo, q)[0])
    if form == 0x04:
        return q + 4 + int(struct.unpack_from("<I", dinfo, q)[0])
    size = _FIXED.get(form)
    if size is None or size < 0:
        raise ValueError(f"DWARF form 0x{form:x} not handled")
    return q + size
