"""A minimal DWARF reader: which debug sections an object carries, the DW_AT_producer
(compiler and flags) of its first compile units and, for split DWARF, the .dwo file each
skeleton unit names, decoding only each unit's first DIE."""
from __future__ import annotations

import mmap
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.verify.elf import SHF_COMPRESSED, ElfInfo, read_elf, read_section
from orchestrator.verify.elf_header import Buffer, c_string

DW_AT_PRODUCER = 0x25
DW_AT_COMP_DIR = 0x1b
DW_AT_DWO_NAME = 0x76       # DWARF 5
DW_AT_GNU_DWO_NAME = 0x2130  # GCC's -gsplit-dwarf with DWARF 4
_STRING_FORMS_INDEXED = (0x1f02, 0x1a, 0x25, 0x26, 0x27, 0x28)  # GNU_str_index, strx, strx1-4


@dataclass(frozen=True)
class DebugFacts:
    """What DWARF says about how an object was compiled."""
    has_debug_info: bool
    has_debug_line: bool
    producers: tuple[str, ...]
    # Split DWARF: the .dwo path each skeleton unit names (relative comp_dir: to the object's
    # directory, as lldb reads it), and those of them that are not there.
    dwo_files: tuple[str, ...] = ()
    missing_dwo: tuple[str, ...] = ()


def debug_facts(path: Path, info: ElfInfo, max_units: int = 64) -> DebugFacts:
    """Presence of .debug_info/.debug_line and the DW_AT_producer of the first compile units
    (max_units=0: presence only, nothing decoded). A skeleton unit's producer is read from its
    .dwo; every skeleton unit's .dwo is looked for."""
    has_info = ".debug_info" in info.sections and info.sections[".debug_info"][1] > 0
    has_line = ".debug_line" in info.sections and info.sections[".debug_line"][1] > 0
    producers: list[str] = []
    dwo: list[Path] = []
    missing: list[str] = []
    if has_info and max_units > 0:
        try:
            units = unit_attrs(path, info, max_units, _WANTED)
            if len(units) == max_units and any(map(_dwo_name, units)):  # split: every unit's .dwo
                units = unit_attrs(path, info, None, _WANTED)
        except (struct.error, ValueError, IndexError, zlib.error):
            units = []
        for i, attrs in enumerate(units):
            name = _dwo_name(attrs)
            if name is None:
                if attrs.get(DW_AT_PRODUCER):
                    producers.append(attrs[DW_AT_PRODUCER])
                continue
            file = dwo_path(path, attrs.get(DW_AT_COMP_DIR, ""), name)
            dwo.append(file)
            if not file.is_file():
                missing.append(str(file))
            elif i < max_units:
                producers += dwo_producers(file)
    return DebugFacts(has_info, has_line, tuple(dict.fromkeys(producers)),
                      tuple(str(d) for d in dwo), tuple(missing))


_WANTED = frozenset({DW_AT_PRODUCER, DW_AT_COMP_DIR, DW_AT_DWO_NAME, DW_AT_GNU_DWO_NAME})


def _dwo_name(attrs: dict[int, str]) -> str | None:
    return attrs.get(DW_AT_GNU_DWO_NAME) or attrs.get(DW_AT_DWO_NAME)


def dwo_path(obj: Path, comp_dir: str, dwo_name: str) -> Path:
    """Where lldb looks for a skeleton unit's .dwo: <comp_dir>/<dwo_name>, a relative comp_dir
    taken from the object's own directory."""
    base = Path(comp_dir)
    if not base.is_absolute():
        base = obj.parent / base
    return base / dwo_name


def skeleton_units(path: Path, info: ElfInfo) -> list[tuple[str, str]]:
    """(comp_dir, dwo name) of each split-DWARF skeleton unit in the object."""
    if ".debug_info" not in info.sections:
        return []
    out = []
    for attrs in unit_attrs(path, info, None, _WANTED):
        name = _dwo_name(attrs)
        if name is not None:
            out.append((attrs.get(DW_AT_COMP_DIR, ""), name))
    return out


def dwo_producers(dwo: Path, max_units: int = 1) -> list[str]:
    """DW_AT_producer of a .dwo's first units (its strings are indexed: .debug_str_offsets.dwo)."""
    try:
        info = read_elf(dwo, symbols=False)
        try:
            units = unit_attrs(dwo, info, max_units, frozenset({DW_AT_PRODUCER}), suffix=".dwo")
        finally:
            info.close()
    except (OSError, struct.error, ValueError, IndexError, zlib.error):
        return []
    return [u[DW_AT_PRODUCER] for u in units if u.get(DW_AT_PRODUCER)]


def _uleb(buf: Buffer, p: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[p]
        p += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return result, p


def unit_attrs(path: Path, info: ElfInfo, max_units: int | None, wanted: frozenset[int],
               suffix: str = "") -> list[dict[int, str]]:
    """Walk compile-unit headers and decode each unit's first DIE: its string attributes in
    `wanted`. suffix ".dwo" reads a split-DWARF file's sections (.debug_info.dwo, ...)."""
    off, size, flags = info.sections[".debug_info" + suffix]
    compressed = bool(flags & SHF_COMPRESSED)
    abbrev = read_section(path, info, ".debug_abbrev" + suffix) or b""
    strs: dict[str, bytes] = {}

    def section(sec: str) -> bytes:
        if sec not in strs:
            strs[sec] = read_section(path, info, sec) or b""
        return strs[sec]

    def string_of(form: int, value: int, osz: int, version: int) -> str | None:
        if form == 0x0e:  # strp
            return c_string(section(".debug_str" + suffix), value).decode(errors="replace")
        if form == 0x1f:  # line_strp
            return c_string(section(".debug_line_str"), value).decode(errors="replace")
        if form in _STRING_FORMS_INDEXED:  # an index into .debug_str_offsets(.dwo)
            table = section(".debug_str_offsets" + suffix)
            at = (8 if version >= 5 else 0) + value * osz  # DWARF 5's table has a header
            o = struct.unpack_from("<Q" if osz == 8 else "<I", table, at)[0]
            return c_string(section(".debug_str" + suffix), o).decode(errors="replace")
        return None

    out: list[dict[int, str]] = []
    with open(path, "rb") as f:
        if compressed:
            dinfo: Buffer = read_section(path, info, ".debug_info" + suffix) or b""
            base = 0
            total = len(dinfo)
        else:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            dinfo, base, total = mm, off, size
        try:
            p = 0
            while max_units is None or len(out) < max_units:
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
                out.append(_first_die_attrs(dinfo, q, abbrev, abbr_off, addr_size, osz, version,
                                            wanted, string_of))
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


def _first_die_attrs(dinfo: Buffer, q: int, abbrev: bytes, abbr_off: int, addr_size: int,
                     osz: int, version: int, wanted: frozenset[int],
                     string_of: Callable[[int, int, int, int], str | None]) -> dict[int, str]:
    out: dict[int, str] = {}
    code, q = _uleb(dinfo, q)
    a = abbr_off
    while True:  # find the abbreviation with this code
        acode, a = _uleb(abbrev, a)
        if acode == 0:
            return out
        _tag, a = _uleb(abbrev, a)
        a += 1  # children flag
        if acode == code:
            break
        a = _skip_abbrev_attrs(abbrev, a)
    while len(out) < len(wanted):
        at, a = _uleb(abbrev, a)
        form, a = _uleb(abbrev, a)
        if form == 0x21:  # implicit_const carries its value in the abbreviation
            _, a = _uleb(abbrev, a)
        if at == 0 and form == 0:
            break
        if at in wanted:
            if form == 0x08:  # string
                out[at] = c_string(dinfo, q).decode(errors="replace")
            elif form in (0x0e, 0x1f):  # strp, line_strp
                value = int(struct.unpack_from("<Q" if osz == 8 else "<I", dinfo, q)[0])
                text = string_of(form, value, osz, version)
                if text is not None:
                    out[at] = text
            elif form in _STRING_FORMS_INDEXED:
                text = string_of(form, _index_value(dinfo, q, form), osz, version)
                if text is not None:
                    out[at] = text
        q = _skip_form(dinfo, q, form, addr_size, osz)
    return out


def _index_value(dinfo: Buffer, q: int, form: int) -> int:
    if form in (0x1f02, 0x1a):
        return _uleb(dinfo, q)[0]
    size = {0x25: 1, 0x26: 2, 0x27: 3, 0x28: 4}[form]
    return int.from_bytes(dinfo[q:q + size], "little")


def _skip_form(dinfo: Buffer, q: int, form: int, addr_size: int, osz: int) -> int:
    if form == 0x01:  # addr
        return q + addr_size
    if form in (0x0e, 0x1f, 0x17, 0x10, 0x1d):  # strp, line_strp, sec_offset, ref_addr, strp_sup
        return q + osz
    if form == 0x08:
        return dinfo.find(b"\0", q) + 1
    if form in (0x0f, 0x15, 0x1a, 0x1b, 0x22, 0x23, 0x0d, 0x1f01, 0x1f02):  # udata/.../GNU_*_index
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
