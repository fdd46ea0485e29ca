"""A compiler:nvcc lock entry pins the CUDA toolkit nvcc uses (found by `nvcc --dryrun`):
cicc, ptxas, fatbinary, nvlink, cudafe++, nvcc.profile, libdevice, cudart and a digest of
the include directory. check_machine re-checks them through a stat cache (an unchanged file
is not read again) and names a changed one.

The committed locks name no nvcc of the machine (CUDA comes from locks/cuda13.toml's wheels,
see test_cuda_toolkit); the pin is checked on the locked toolkit's nvcc as a [compilers]
entry would name it, and drift on a toolkit laid out like it under tmp_path: a copied nvcc
(nvcc finds its tools relative to itself), a copied ptxas and include/ that the test edits,
links to the real files for the rest.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from orchestrator.errors import UserError
from orchestrator.hashing import StatCache, sha256_file
from orchestrator.lock.files import load_lock
from orchestrator.lock.probe import probe_compiler
from orchestrator.model.lock import CompilerEntry, Lock
from orchestrator.toolchain.machine_check import check_machine

REPO = Path(__file__).resolve().parents[1]
TOOLKIT = ("cicc", "ptxas", "fatbinary", "nvlink", "cudafe++", "nvcc.profile", "libdevice",
           "cudart", "cudart_static", "include")


@pytest.fixture
def cuda(session_cuda_toolchain: Path) -> Path:
    """The locked CUDA toolkit's root (real path: what nvcc's --dryrun names)."""
    return (session_cuda_toolchain / "cuda").resolve()


def _only(lock: Lock, entry: CompilerEntry) -> Lock:
    return lock.model_copy(update={"entries": {"compiler:nvcc": entry}})


def test_an_nvcc_entry_pins_the_real_toolkit(tmp_path: Path, cuda: Path) -> None:
    entry = probe_compiler("nvcc", str(cuda / "bin" / "nvcc"), pin_programs=True)
    lock = _only(load_lock(REPO / "locks", "toolchain"), entry)
    assert isinstance(entry, CompilerEntry) and entry.programs is not None
    assert set(TOOLKIT) <= set(entry.programs)
    real = cuda
    for name in ("ptxas", "cicc", "cudart", "fatbinary", "nvlink"):
        pin = entry.programs[name]
        assert Path(pin.path).is_relative_to(real) and pin.sha256 == sha256_file(pin.path), name
    assert Path(entry.programs["cudart"].path).name.startswith("libcudart.so.")
    assert Path(entry.programs["include"].path).joinpath("cuda_runtime.h").is_file()
    # The machine matches: fresh (full re-hash), then twice through the stat cache.
    check_machine(lock, ["compiler:nvcc"])
    cache_file = tmp_path / "machine-stat-cache.json"
    check_machine(lock, ["compiler:nvcc"], StatCache(cache_file))
    cached = json.loads(cache_file.read_text())
    assert entry.programs["ptxas"].path in cached
    assert str(Path(entry.programs["include"].path) / "cuda_runtime.h") in cached
    check_machine(lock, ["compiler:nvcc"], StatCache(cache_file))


def test_gcc_entries_still_pin_their_programs() -> None:
    lock = load_lock(REPO / "locks", "toolchain")
    for key, progs in (("compiler:cc", {"cc1", "as", "ld"}), ("compiler:cxx", {"cc1plus", "as", "ld"})):
        e = lock.entries[key]
        assert isinstance(e, CompilerEntry) and set(e.programs or {}) == progs
    check_machine(lock, ["compiler:cc", "compiler:cxx"])


@pytest.fixture
def toolkit(tmp_path: Path, cuda: Path) -> Path:
    """A CUDA tree like the real one: nvcc, nvcc.profile, ptxas and include/ copied."""
    real = cuda
    root = tmp_path / "cuda"
    (root / "bin").mkdir(parents=True)
    for name in os.listdir(real / "bin"):
        if name in ("nvcc", "nvcc.profile", "ptxas"):
            shutil.copy2(real / "bin" / name, root / "bin" / name)
        else:
            (root / "bin" / name).symlink_to(real / "bin" / name)
    for name in ("nvvm", "lib"):
        (root / name).symlink_to(real / name)
    shutil.copytree(real / "include", root / "include", symlinks=True)
    (root / "targets" / "x86_64-linux").mkdir(parents=True)
    (root / "targets" / "x86_64-linux" / "include").symlink_to("../../include")
    (root / "targets" / "x86_64-linux" / "lib").symlink_to("../../lib")
    return root


def test_a_changed_toolkit_file_is_drift(toolkit: Path, tmp_path: Path, cuda: Path) -> None:
    nvcc = toolkit / "bin" / "nvcc"
    entry = probe_compiler("nvcc", str(nvcc), pin_programs=True)
    assert entry.programs is not None
    assert entry.programs["ptxas"].path == str(toolkit / "bin" / "ptxas")
    assert entry.programs["include"].path == str(toolkit / "include")
    assert entry.programs["cicc"].path == str(cuda / "nvvm" / "bin" / "cicc")
    lock = _only(load_lock(REPO / "locks", "toolchain"), entry)
    cache_file = tmp_path / "cache.json"
    check_machine(lock, None, StatCache(cache_file))  # warms the cache

    with open(toolkit / "bin" / "ptxas", "ab") as f:
        f.write(b"\0junk")
    for cache in (StatCache(cache_file), None):  # the cheap check and the full one
        with pytest.raises(UserError, match=r"lock drift: compiler:nvcc .*program ptxas .*"
                                            + str(toolkit / "bin" / "ptxas") + " changed"):
            check_machine(lock, None, cache)
    shutil.copy2(cuda / "bin" / "ptxas", toolkit / "bin" / "ptxas")
    check_machine(lock, None, StatCache(cache_file))

    header = toolkit / "include" / "cuda_runtime.h"
    header.write_text(header.read_text() + "\n#define ORCH_DRIFT 1\n")
    with pytest.raises(UserError, match=r"lock drift: compiler:nvcc .*program include .*"
                                        + str(toolkit / "include") + " changed"):
        check_machine(lock, None, StatCache(cache_file))
    header.unlink()
    with pytest.raises(UserError, match=r"program include .* changed"):
        check_machine(lock, None)


def test_the_stat_cache_spares_reading_an_unchanged_file(toolkit: Path, tmp_path: Path) -> None:
    """A cache entry whose stat matches is believed without reading the file (what keeps
    check_machine cheap); the full check (no cache) reads it and finds the truth."""
    entry = probe_compiler("nvcc", str(toolkit / "bin" / "nvcc"), pin_programs=True)
    lock = _only(load_lock(REPO / "locks", "toolchain"), entry)
    cache_file = tmp_path / "cache.json"
    check_machine(lock, None, StatCache(cache_file))
    data = json.loads(cache_file.read_text())
    ptxas = str(toolkit / "bin" / "ptxas")
    data[ptxas][4] = "0" * 64  # same stat, another hash: only a cache could say so
    cache_file.write_text(json.dumps(data))
    with pytest.raises(UserError, match="program ptxas"):
        check_machine(lock, None, StatCache(cache_file))
    check_machine(lock, None)
