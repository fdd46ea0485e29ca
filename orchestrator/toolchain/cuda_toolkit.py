"""The locked CUDA toolkit (`cuda:toolkit`): the CUDA wheels' one root in site-packages
(nvidia/cu13) laid out as a CUDA install, and the checks made against it before a compile.
(A toolkit from Debian's packages, origin "deb": cuda_debs.)

The wheels put nvcc, nvvm, the headers and cudart under one root but not as CMake's
FindCUDAToolkit / enable_language(CUDA) and torch's cpp_extension look for them; the
materialized toolchain adds (inside its own tree, before its file manifest is written):
`lib64 -> lib`, `targets/<arch>-linux/{include,lib}` (what nvcc.profile's _TARGET_DIR_ names),
an unversioned link for every versioned library (`libcudart.so -> libcudart.so.13`),
`version.json`, and `<toolchain>/cuda`, a relative link to the root. Nothing outside the
toolchain is read: the system's /usr/local/cuda plays no part.
"""
from __future__ import annotations

import json
import os
import platform
import re
import subprocess
from pathlib import Path

from orchestrator.errors import UserError
from orchestrator.hashing import pretty_json
from orchestrator.model.lock import CudaToolkitEntry, Lock, PypiEntry
from orchestrator.model.recipe import Recipe, ResolvedVariant
from orchestrator.toolchain import cuda_debs

# `<toolchain>/cuda`: the toolkit root, as CUDAToolkit_ROOT / CUDA_HOME name it.
CUDA_LINK = "cuda"
TOOLKIT_KEY = "cuda:toolkit"
_VERSIONED_SO = re.compile(r"^(lib[\w+-]+\.so)\.\d+$")


def toolkit_entry(lock: Lock) -> CudaToolkitEntry | None:
    e = lock.entries.get(TOOLKIT_KEY)
    return e if isinstance(e, CudaToolkitEntry) else None


def _link(path: Path, target: str) -> None:
    if not path.exists() and not path.is_symlink():
        path.symlink_to(target)


def _version_json(lock: Lock, entry: CudaToolkitEntry) -> str:
    """CUDA's version.json: the SDK as the compiler's release, and one key per wheel."""
    doc: dict[str, dict[str, str]] = {"cuda": {"name": "CUDA SDK", "version": entry.version}}
    for name in sorted(entry.packages):
        pin = lock.entries.get(f"pypi:{name}")
        if isinstance(pin, PypiEntry):
            doc[name.removeprefix("nvidia-").replace("-", "_")] = {"name": name, "version": pin.version}
    return pretty_json(doc)


def assemble(toolchain_root: Path, site_packages: Path, lock: Lock) -> dict[str, object] | None:
    """Lay out the locked toolkit's root (see the module docstring) under a toolchain being
    materialized; returns the facts toolchain.json records under "cuda" (None: no toolkit)."""
    entry = toolkit_entry(lock)
    if entry is None:
        return None
    if entry.origin == "deb":  # Debian's packages, unpacked under <toolchain>/debs/root
        nvcc = cuda_debs.lay_out(toolchain_root, lock, entry, CUDA_LINK)
        return {"version": entry.version, "root": CUDA_LINK, "origin": "deb",
                "architectures": supported_architectures(nvcc)}
    root = site_packages / entry.root
    nvcc = root / "bin" / "nvcc"
    if not nvcc.is_file():
        raise UserError(f"the locked CUDA wheels put no bin/nvcc under {entry.root} of "
                        "site-packages; fix [cuda] requirements (nvidia-cuda-nvcc) and `doit lock`")
    lib = root / "lib"
    lib.mkdir(exist_ok=True)
    for so in sorted(lib.iterdir()):
        m = _VERSIONED_SO.match(so.name)
        if m:
            _link(lib / m[1], so.name)
    _link(root / "lib64", "lib")
    target = root / "targets" / f"{platform.machine()}-linux"
    target.mkdir(parents=True, exist_ok=True)
    _link(target / "include", "../../include")
    _link(target / "lib", "../../lib")
    (root / "version.json").write_text(_version_json(lock, entry))
    _link(toolchain_root / CUDA_LINK, os.path.relpath(root, toolchain_root))
    return {"version": entry.version, "root": CUDA_LINK,
            "architectures": supported_architectures(nvcc)}


def supported_architectures(nvcc: Path) -> list[str]:
    """What the nvcc supports: `--list-gpu-code` (sm_*) and `--list-gpu-arch` (compute_*)."""
    out: list[str] = []
    for flag in ("--list-gpu-code", "--list-gpu-arch"):
        res = subprocess.run([str(nvcc), flag], capture_output=True, text=True)
        if res.returncode != 0:
            raise UserError(f"the locked nvcc {nvcc} does not run ({flag}: exit {res.returncode}); "
                            "remove the toolchain to materialize it again")
        out += res.stdout.split()
    return out


def requested_by(recipe: Recipe, variant: ResolvedVariant) -> str | None:
    """What in a recipe asks for CUDA (a build.uses key, a CMAKE_CUDA_* define, pytorch's
    cuda = true), or None."""
    for key in recipe.build.uses or []:
        if key in (TOOLKIT_KEY, "compiler:nvcc"):
            return f"build.uses {key!r}"
    for name in variant.defines:
        if name.startswith(("CMAKE_CUDA", "CUDAToolkit")):
            return f"the define {name}"
    if recipe.build.pytorch is not None and recipe.build.pytorch.cuda:
        return "[build.pytorch] cuda = true"
    return None


def check_recipe_has_toolkit(recipe: Recipe, variant: ResolvedVariant, lock: Lock, where: str) -> None:
    """A recipe that asks for CUDA needs `cuda:toolkit` in its lock and in build.uses."""
    asked = requested_by(recipe, variant)
    if asked is None:
        return
    if toolkit_entry(lock) is None:
        raise UserError(f"{where}: asks for CUDA ({asked}) but locks/{recipe.lock}.lock.json has no "
                        "CUDA toolkit; set lock = \"cuda13\" (or \"cuda12\") in the recipe, or add a [cuda] section "
                        f"to locks/{recipe.lock}.toml and run `doit lock`")
    if TOOLKIT_KEY not in (recipe.build.uses or []):
        raise UserError(f"{where}: asks for CUDA ({asked}) but build.uses lacks {TOOLKIT_KEY!r}; "
                        "add it so the toolkit is part of the artifact id")
    if "pypi:torch" in (recipe.build.uses or []):
        check_torch_matches_toolkit(lock, where)


_CU_SUFFIX = re.compile(r"^nvidia-[a-z0-9-]+-cu(\d+)$")
_LOCAL_CU = re.compile(r"\+cu(\d+)\d$")


def torch_cuda_major(lock: Lock) -> tuple[str, str] | None:
    """The CUDA major the lock's torch wheel was built for, and what says so: a `+cuNNN`
    local version, the `cuda-toolkit` pin torch requires, or its `nvidia-*-cuNN` wheels
    (cuDNN, NCCL, ...). None: no torch, or a CPU one."""
    torch = lock.entries.get("pypi:torch")
    if not isinstance(torch, PypiEntry):
        return None
    m = _LOCAL_CU.search(torch.version)
    if m:
        return m[1], f"its version {torch.version}"
    meta = lock.entries.get("pypi:cuda-toolkit")
    if isinstance(meta, PypiEntry):
        return meta.version.split(".")[0], f"cuda-toolkit=={meta.version}, which it requires"
    for key in sorted(lock.entries):
        m = _CU_SUFFIX.match(key.removeprefix("pypi:")) if key.startswith("pypi:") else None
        if m:
            return m[1], f"its {key.removeprefix('pypi:')} wheel"
    return None


def check_torch_matches_toolkit(lock: Lock, where: str) -> None:
    """A CUDA torch wheel and the toolkit that compiles against it share a CUDA major: an
    extension built with CUDA 12 against a CUDA 13 torch links two cudarts. One line, at plan
    time, before any compile."""
    entry, found = toolkit_entry(lock), torch_cuda_major(lock)
    if entry is None or found is None:
        return
    major, said = found
    if entry.version.split(".")[0] != major:
        torch = lock.entries["pypi:torch"]
        assert isinstance(torch, PypiEntry)
        raise UserError(f"{where}: locks/{lock.name}.lock.json pins torch {torch.version} built for "
                        f"CUDA {major} ({said}) but a CUDA {entry.version} toolkit; lock the toolkit "
                        f"of CUDA {major} (e.g. locks/cuda13-torch.toml) or a torch wheel built for "
                        f"CUDA {entry.version.split('.')[0]}, and run `doit lock`")


_ARCH = re.compile(r"^(\d+[af]?)(-real|-virtual)?$")


def check_architectures(spec: str, supported: list[str], version: str, where: str,
                        setting: str = "CMAKE_CUDA_ARCHITECTURES", given: str | None = None) -> None:
    """Every entry of CMAKE_CUDA_ARCHITECTURES (`90`, `80-real`, `90-virtual`, `all`, ...)
    is one the locked nvcc can compile for; else one line naming what it supports. `setting`
    names where the list came from (TORCH_CUDA_ARCH_LIST, translated to CMake's form; `given`:
    its entries as written, in the same order)."""
    written = given.replace(",", ";").replace(" ", ";").split(";") if given else None
    written = [w for w in written if w] if written else None
    items = [s.strip() for s in spec.replace(",", ";").split(";")]
    for i, item in enumerate(items):
        if not item or item in ("all", "all-major", "native"):
            continue
        shown = written[i] if written and len(written) == len(items) else item
        m = _ARCH.match(item)
        if m is None:
            raise UserError(f"{where}: {setting} entry {shown!r} is not an "
                            "architecture; write e.g. \"90\", \"80-real\" or \"90-virtual\"")
        need = [f"compute_{m[1]}"] if m[2] == "-virtual" else [f"sm_{m[1]}"]
        if m[2] is None and setting != "CMAKE_CUDA_ARCHITECTURES":
            need.append(f"compute_{m[1]}")  # 9.0+PTX: the PTX too
        if not all(n in supported for n in need):
            have = " ".join(a[3:] for a in supported if a.startswith("sm_"))
            item = shown
            raise UserError(f"{where}: CUDA architecture {item!r} ({setting}) is "
                            f"not supported by the locked nvcc {version}; it supports: {have}; "
                            "pick one of those or lock another toolkit")


def toolchain_facts(toolchain_json: Path) -> dict[str, object] | None:
    """The "cuda" facts a materialized toolchain recorded (None: it has no toolkit)."""
    try:
        facts = json.loads(toolchain_json.read_text()).get("cuda")
    except (OSError, ValueError):
        return None
    return facts if isinstance(facts, dict) else None
