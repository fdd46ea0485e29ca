"""Symbol lookup through a library's .gnu.hash table, the way ld.so finds a definition.

A provider library then costs a few page reads per looked-up name instead of decoding its whole
.dynsym (75k names for libtorch_cpu.so). The file stays mapped until `close()`.
"""
from __future__ import annotations

import functools
import mmap
import operator
import struct
from pathlib import Path
from typing import BinaryIO

STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 1, 2, 10
STT_SECTION, STT_FILE = 3, 4


# 33**k mod 2**32: h(name) = 5381 * 33**n + sum(name[n-1-k] * 33**k), one dot product in C.
def _powers(n: int) -> list[int]:
    """33**k mod 2**32 for k < n, by multiplication (a pow() each took 2 ms of the import)."""
    powers = [1]
    for _ in range(n - 1):
        powers.append(powers[-1] * 33 & 0xFFFFFFFF)
    return powers


_POWERS = _powers(4097)


@functools.lru_cache(maxsize=1 << 17)
def gnu_hash(name: bytes) -> int:
    """The DJB hash .gnu.hash uses (h = h * 33 + c, 32 bits)."""
    if len(name) >= len(_POWERS):
        h = 5381
        for c in name:
            h = (h * 33 + c) & 0xFFFFFFFF
        return h
    return int(5381 * _POWERS[len(name)] + sum(map(operator.mul, reversed(name), _POWERS))) & 0xFFFFFFFF


class GnuHashIndex:
    """Exported definitions of one library, looked up by name via its .gnu.hash section."""

    def __init__(self, path: Path, *, is64: bool, le: str, hash_off: int, dynsym_off: int,
                 dynstr_off: int, versym_off: int | None, verdef_names: dict[int, str],
                 header: tuple[int, int, int, int]) -> None:
        self.path = path
        self.is64, self.le = is64, le
        self.nbuckets, self.symoffset, self.bloom_size, self.bloom_shift = header
        word = 8 if is64 else 4
        self.bloom_off = hash_off + 16
        self.buckets_off = self.bloom_off + self.bloom_size * word
        self.chain_off = self.buckets_off + self.nbuckets * 4
        self.dynsym_off, self.dynstr_off, self.versym_off = dynsym_off, dynstr_off, versym_off
        self.verdef_names = verdef_names
        self._bloom_fmt = le + ("Q" if is64 else "I")
        self._bits = 64 if is64 else 32
        self._sym_fmt, self._ent = (le + "IBBH", 24) if is64 else (le + "IIIBBH", 16)
        # compiled once: a lookup unpacks 5-10 fields (a format string per call costs more)
        self._word = struct.Struct(self._bloom_fmt).unpack_from
        self._u32 = struct.Struct(le + "I").unpack_from
        self._u16 = struct.Struct(le + "H").unpack_from
        self._sym = struct.Struct(self._sym_fmt).unpack_from
        self._mm: mmap.mmap | None = None
        self._f: BinaryIO | None = None
        self._memo: dict[bytes, tuple[str | None, ...] | None] = {}

    def _map(self) -> mmap.mmap:
        if self._mm is None:
            f = self._f = open(self.path, "rb")
            self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return self._mm

    def close(self) -> None:
        if self._mm is not None:
            self._mm.close()
            if self._f is not None:
                self._f.close()
            self._mm = self._f = None

    def bloom(self) -> tuple[tuple[int, ...], int, int, int]:
        """(bloom words, word count, shift2, bits per word) for callers that pre-filter names."""
        if self.bloom_size == 0:
            return ((), 0, 0, self._bits)
        words = struct.unpack_from(f"{self.le}{self.bloom_size}{self._bloom_fmt[-1]}", self._map(),
                                   self.bloom_off)
        return (words, self.bloom_size, self.bloom_shift, self._bits)

    def versions(self, name: bytes, h: int | None = None) -> tuple[str | None, ...] | None:
        """The versions `name` is exported with (None = unversioned); None when not exported.
        `h`: the name's gnu_hash, from a caller that already passed this index's `bloom()`
        test with it (the lookup then goes straight to the bucket)."""
        try:
            return self._memo[name]
        except KeyError:
            found = self._memo[name] = self._lookup(name, h)
            return found

    def _lookup(self, name: bytes, h: int | None) -> tuple[str | None, ...] | None:
        if self.nbuckets == 0:
            return None
        mm = self._map()
        if h is None:
            h = gnu_hash(name)
            bits = self._bits
            word = self._word(mm, self.bloom_off + ((h // bits) % self.bloom_size) * (bits // 8))[0]
            mask = (1 << (h % bits)) | (1 << ((h >> self.bloom_shift) % bits))
            if word & mask != mask:
                return None
        idx = self._u32(mm, self.buckets_off + (h % self.nbuckets) * 4)[0]
        if idx < self.symoffset:
            return None
        found: list[str | None] = []
        n = len(name)
        u32, chain = self._u32, self.chain_off - self.symoffset * 4
        while True:
            h2 = u32(mm, chain + idx * 4)[0]
            if (h | 1) == (h2 | 1):
                v = self._definition(mm, idx, name, n)
                if v is not False:
                    found.append(v)  # type: ignore[arg-type]
            if h2 & 1:
                break
            idx += 1
        return tuple(found) if found else None

    def _definition(self, mm: mmap.mmap, idx: int, name: bytes, n: int) -> str | None | bool:
        """The version of symbol `idx` if it is an exported definition of `name`, else False."""
        sym = self._sym(mm, self.dynsym_off + idx * self._ent)
        if self.is64:
            st_name, st_info, st_other, shndx = sym
        else:
            st_name, st_info, st_other, shndx = sym[0], sym[3], sym[4], sym[5]
        start = self.dynstr_off + st_name
        if mm[start:start + n] != name or mm[start + n] != 0:
            return False
        bind, typ = st_info >> 4, st_info & 0xF
        if shndx == 0 or bind not in (STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE) \
                or typ in (STT_SECTION, STT_FILE) or (st_other & 3) in (1, 2):
            return False
        ndx = 1
        if self.versym_off is not None:
            ndx = self._u16(mm, self.versym_off + idx * 2)[0]
        if ndx == 0:
            return False
        return self.verdef_names.get(ndx & 0x7FFF) if (ndx & 0x7FFF) > 1 else None
