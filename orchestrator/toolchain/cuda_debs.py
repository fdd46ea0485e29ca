"""A CUDA toolkit root made from Debian's CUDA packages (`cuda:toolkit` with origin "deb":
nvidia-cuda-toolkit, nvidia-cuda-dev, libnvvm4, libcudart12, ... unpacked into
<toolchain>/debs/root).

Debian spreads the toolkit over /usr (nvcc and cicc in /usr/lib/nvidia-cuda-toolkit/bin, the
other tools in /usr/bin, headers in /usr/include, libraries in the multiarch directory) and
points nvcc at it with /etc/nvcc.profile. <toolchain>/cuda is laid out as NVIDIA's installer
lays a toolkit out, with relative links into the unpacked tree: bin/ (nvcc copied, so that the
nvcc.profile beside it is the one it reads: every path relative to it), nvvm/{bin,libdevice,
lib64,include}, include, lib -> the multiarch directory, lib64 -> lib, targets/<arch>-linux,
version.json. Unversioned links of libraries the lock does not carry (libcublas.so when
libcublas12 is not locked) are removed, so that what the root offers is there.
"""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
from pathlib import Path

from orchestrator.lock.resolve import GDB_TREE
from orchestrator.model.lock import CudaToolkitEntry, DebEntry, Lock

# NVIDIA's own nvcc.profile, every path relative to the directory of nvcc (_HERE_).
NVCC_PROFILE = """\
TOP              = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/$(_NVVM_BRANCH_)/libdevice
LD_LIBRARY_PATH += $(TOP)/lib:
PATH            += $(TOP)/$(_NVVM_BRANCH_)/bin:$(_HERE_):
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib/stubs" "-L$(TOP)/lib"
CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
"""
# The toolkit's programs Debian puts in /usr/bin (nvcc runs some, users the rest).
TOOLS = ("ptxas", "fatbinary", "nvlink", "cudafe++", "bin2c", "cuobjdump", "nvdisasm", "nvprune",
         "cu++filt", "compute-sanitizer", "__nvcc_device_query")
# cuda-gdb (`[cuda.gdb]`, unpacked in <toolchain>/debs/<GDB_TREE> with its suite's libc and
# libstdc++): run through that suite's loader, with its libraries on the loader's path only
# (not LD_LIBRARY_PATH: the program it debugs runs with the machine's).
GDB_WRAPPER = """\
#!/bin/sh
r="$(dirname "$(readlink -f "$0")")/../../debs/{tree}"
lib="$r/usr/lib/{multiarch}"
exec "$lib/ld-linux-x86-64.so.2" --library-path "$lib:$r/lib/{multiarch}" "$r/usr/bin/{program}" "$@"
"""
CUDA_LIBRARY = re.compile(r"^lib(cu|nv|npp|accinj|cuinj)\w*\.so")


def _rel_link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(target, link.parent))


def _drop_dangling_so_links(lib: Path) -> list[str]:
    gone = []
    for p in sorted(lib.iterdir()):
        if p.is_symlink() and CUDA_LIBRARY.match(p.name) and not p.exists():
            p.unlink()
            gone.append(p.name)
    return gone


def version_json(lock: Lock, entry: CudaToolkitEntry) -> str:
    doc: dict[str, dict[str, str]] = {"cuda": {"name": "CUDA SDK", "version": entry.version}}
    for name in sorted(entry.packages):
        deb = lock.entries.get(f"deb:{name}")
        if isinstance(deb, DebEntry):
            doc[name.replace("-", "_").replace("+", "p")] = {"name": name, "version": deb.version}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def lay_out(toolchain_root: Path, lock: Lock, entry: CudaToolkitEntry, link_name: str) -> Path:
    """<toolchain_root>/<link_name> as a CUDA install over <toolchain_root>/debs/root; returns
    the root's bin/nvcc."""
    debs = toolchain_root / "debs" / "root"
    tools = debs / entry.root
    multiarch = debs / "usr" / "lib" / f"{platform.machine()}-linux-gnu"
    root = toolchain_root / link_name
    (root / "bin").mkdir(parents=True)
    nvcc = root / "bin" / "nvcc"
    shutil.copy2(tools / "bin" / "nvcc", nvcc)
    (root / "bin" / "nvcc.profile").write_text(NVCC_PROFILE)
    _rel_link(root / "bin" / "crt", tools / "bin" / "crt")
    for name in TOOLS:
        if (debs / "usr" / "bin" / name).exists():
            _rel_link(root / "bin" / name, debs / "usr" / "bin" / name)
    _rel_link(root / "nvvm" / "bin" / "cicc", tools / "bin" / "cicc")
    _rel_link(root / "nvvm" / "libdevice", tools / "libdevice")
    for so in sorted(multiarch.glob("libnvvm.so*")):
        _rel_link(root / "nvvm" / "lib64" / so.name, so)
    if (debs / "usr" / "include" / "nvvm.h").is_file():
        _rel_link(root / "nvvm" / "include" / "nvvm.h", debs / "usr" / "include" / "nvvm.h")
    _rel_link(root / "include", debs / "usr" / "include")
    _drop_dangling_so_links(multiarch)
    _rel_link(root / "lib", multiarch)
    (root / "lib64").symlink_to("lib")
    target = root / "targets" / f"{platform.machine()}-linux"
    target.mkdir(parents=True)
    (target / "include").symlink_to("../../include")
    (target / "lib").symlink_to("../../lib")
    (root / "version.json").write_text(version_json(lock, entry))
    gdb = toolchain_root / "debs" / GDB_TREE
    for program in ("cuda-gdb", "cuda-gdbserver"):
        if (gdb / "usr" / "bin" / program).is_file():
            wrapper = root / "bin" / program
            wrapper.write_text(GDB_WRAPPER.format(tree=GDB_TREE, program=program, multiarch=multiarch.name))
            wrapper.chmod(0o755)
    return nvcc
