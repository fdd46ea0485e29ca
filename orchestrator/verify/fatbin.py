"""The CUDA images (sm_XX cubins, compute_XX PTX) embedded in an ELF file's .nv_fatbin."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from orchestrator.verify.elf import ElfInfo, read_section

FATBIN_MAGIC = 0xBA55ED50


@dataclass(frozen=True)
class CudaImage:
    """One entry of an embedded fatbin: a cubin for sm_XX or PTX for compute_XX."""
    kind: str  # "sm" | "compute"
    arch: int

    def __str__(self) -> str:
        return f"{self.kind}_{self.arch}"


def fatbin_images(path: Path, info: ElfInfo) -> list[CudaImage]:
    """The sm_XX cubins and compute_XX PTX embedded in .nv_fatbin (read from the section)."""
    data = read_section(path, info, ".nv_fatbin")
    if not data:
        return []
    out: list[CudaImage] = []
    off = 0
    while off + 16 <= len(data):
        magic, _ver, hsize, fsize = struct.unpack_from("<IHHQ", data, off)
        if magic != FATBIN_MAGIC:
            off += 8  # containers are 8-aligned; skip padding
            continue
        p, end = off + hsize, off + hsize + fsize
        while p + 32 <= end:
            kind, _ev, ehsize, psize = struct.unpack_from("<HHIQ", data, p)
            arch = struct.unpack_from("<I", data, p + 28)[0]
            if kind in (1, 2):
                img = CudaImage("compute" if kind == 1 else "sm", arch)
                if img not in out:
                    out.append(img)
            if ehsize == 0:
                break
            p += ehsize + psize
        off = end
    return out
