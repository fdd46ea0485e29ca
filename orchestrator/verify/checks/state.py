"""What every check reads: the run's inputs, the resolver and each ELF file's closure."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.verify.elf import ElfInfo, Undefined
from orchestrator.verify.inputs import VerifyConfig
from orchestrator.verify.lldb_reading import StartedProbe
from orchestrator.verify.report import FileFacts
from orchestrator.verify.resolve import Closure, Resolver, realpath, within


@dataclass
class State:
    """What the checks share: the config, the resolver and each artifact ELF's closure."""
    config: VerifyConfig
    resolver: Resolver
    objects: dict[str, ElfInfo]  # path relative to root -> info
    closures: dict[str, Closure]
    extensions: set[str]
    facts: dict[str, FileFacts]
    # files not checked again: their facts from a clean earlier run (verify/cache.py)
    reused: dict[str, FileFacts] = field(default_factory=dict)
    unresolved: dict[str, list[Undefined]] = field(default_factory=dict)
    # the lldb probe started before the files were hashed and read (engine.verify_tree)
    probe_ahead: StartedProbe | None = None
    _blooms: dict[int, tuple[tuple[int, ...], int, int, int] | None] = field(default_factory=dict)

    def bloom(self, obj: ElfInfo) -> tuple[tuple[int, ...], int, int, int] | None:
        """obj's .gnu.hash bloom filter (None: no index, ask `defines` directly)."""
        key = id(obj)
        if key not in self._blooms:
            self._blooms[key] = obj.index.bloom() if obj.index is not None and obj._defined is None else None
        return self._blooms[key]

    def rel(self, path: Path) -> str:
        """A path as the report shows it: relative to the artifact when inside it."""
        real, root = realpath(str(path)), realpath(str(self.config.root))
        return real[len(root) + 1:] if real.startswith(root + "/") else str(path)

    def zone(self, path: Path) -> str:
        """'artifact', 'toolchain' or 'system' for a resolved library path."""
        real = realpath(str(path))
        if within(real, realpath(str(self.config.root))):
            return "artifact"
        for d in self.config.toolchain_dirs:
            if within(real, realpath(str(d))) or within(str(path), str(d)):
                return "toolchain"
        return "system"

    def torch_label(self, lib: ElfInfo) -> str:
        """'torch 2.13.0 (libc10.so)' for a library of the locked torch, else its file name."""
        t = self.config.torch
        if t and t.lib_dir and within(realpath(str(lib.path)), realpath(str(t.lib_dir))):
            return f"torch {t.version} ({lib.path.name})"
        return lib.path.name
