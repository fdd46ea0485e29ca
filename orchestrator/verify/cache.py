"""Verdicts of clean files, reused when nothing a file's verdict depends on has changed.

A verify run without failures records, for each ELF file it checked, the file's facts and
warnings under a key: the digest of the verify code, the run's inputs (rules, variant, search paths,
interpreter, torch; `config_digest`), the file's place in the tree, and its closure as ld.so
would load it now — the file itself by content (sha256), every other object of the tree by its
link interface (verify/elf_interface.py: what the checks read of a library a file loads,
its exported names and versions, soname, needed and search paths), anything else by (device,
inode, size, mtime_ns, ctime_ns) (no write keeps those), and every DT_NEEDED with the file it
resolves to. So a relinked libtorch_cpu.so whose exports did not change leaves the verdicts
of the libraries that load it valid. The build directories are not part of the key: the check
that reads them (RUNPATH into the build tree) runs on reused files too. A later run resolves
the closure again from the dynamic sections alone (no symbols, no DWARF), so a library that
appeared earlier on a search path changes the key, and takes the recorded facts and warnings
instead of checking a file whose key it finds.

Entries live in `<store>/cache/verify/<2 hex>/<key>.json`, each with an HMAC (sha256) under
the store's own secret `<store>/cache/verify/key` (0600, made on first use): an entry that was
edited, copied under another key, or written by someone who cannot read the secret is
ignored, and the file is checked again.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import hmac
import json
import os
from pathlib import Path

from orchestrator.fs import FileSig, write_atomic
from orchestrator.hashing import (
    canonical_json,
    digest_of,
    local_secret,
    remember_sha256,
    remembered_sha256,
    sha256_file,
)
from orchestrator.model.logical_paths import DWO_DIR
from orchestrator.verify.elf_interface import link_interface
from orchestrator.verify.inputs import VerifyConfig, rules_data
from orchestrator.verify.report import FileFacts, Finding
from orchestrator.verify.resolve import Closure, Resolver, realpath, within

SCHEMA = 1
SECRET = "key"


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """The verify package's own source: a changed check never reuses an older verdict."""
    h = hashlib.sha256()
    here = Path(__file__).parent
    for f in sorted(here.rglob("*.py")):
        h.update(f.relative_to(here).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


class VerdictCache:
    """The entries of one store (see the module docstring)."""

    def __init__(self, directory: Path, secret: bytes) -> None:
        self.dir = directory
        self._secret = secret

    @staticmethod
    def open(directory: Path) -> VerdictCache | None:
        """The cache in `directory` (None when it cannot be used: nothing is then reused)."""
        try:
            directory.mkdir(parents=True, exist_ok=True)
            return VerdictCache(directory, local_secret(directory / SECRET))
        except OSError:
            return None

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def _mac(self, key: str, facts: object) -> str:
        return hmac.new(self._secret, canonical_json([SCHEMA, key, facts]), hashlib.sha256).hexdigest()

    def get(self, key: str) -> tuple[FileFacts, list[Finding]] | None:
        """The facts and (warn/info) findings recorded under key; None: not (validly) there."""
        try:
            data = json.loads(self._path(key).read_text())
            body = data.get("verdict")
            if data.get("key") != key or not hmac.compare_digest(
                    str(data.get("mac", "")), self._mac(key, body)):
                return None
            findings = [Finding(**f) for f in body["findings"]]
            if any(f.severity == "fail" for f in findings):
                return None
            return FileFacts(**body["facts"]), findings
        except (OSError, ValueError, TypeError, AttributeError, KeyError):
            return None

    def put(self, key: str, facts: FileFacts, findings: list[Finding]) -> None:
        body = {"facts": dataclasses.asdict(facts),
                "findings": [dataclasses.asdict(f) for f in findings]}
        try:
            write_atomic(self._path(key), json.dumps({"key": key, "verdict": body,
                                                      "mac": self._mac(key, body)}), durable=False)
        except OSError:
            pass  # a cache that cannot be written only costs the next run its time


class RootKeys:
    """Cache keys of one run's ELF files."""

    def __init__(self, cfg: VerifyConfig, resolver: Resolver) -> None:
        self.cfg, self.resolver = cfg, resolver
        self.root = realpath(str(cfg.root))
        self.base = digest_of([SCHEMA, code_digest(), self.config_digest()])
        self._dwo: dict[str, list[str] | None] = {}

    def norm(self, path: Path | str | None) -> str | None:
        """A path as the key holds it: relative to the tree when inside it."""
        if path is None:
            return None
        real = realpath(str(path))
        return "@" + real[len(self.root) + 1:] if within(real, self.root) else str(path)

    def config_digest(self) -> str:
        cfg, interp, torch = self.cfg, self.cfg.interpreter, self.cfg.torch
        return digest_of({
            "rules": rules_data(cfg.rules), "variant": cfg.variant, "build_type": cfg.build_type,
            "defines": {k: str(v) for k, v in cfg.defines.items()}, "prefix": self.norm(cfg.prefix),
            "ld_library_path": [self.norm(p) for p in cfg.search.ld_library_path],
            "conf_dirs": cfg.search.conf_dirs, "default_dirs": cfg.search.default_dirs,
            "toolchain_dirs": [str(p) for p in cfg.toolchain_dirs],
            "python_dirs": [self.norm(p) for p in cfg.python_dirs],
            "interpreter": [str(interp.path), interp.version, interp.ext_suffix,
                            interp.libpython_soname] if interp else None,
            "torch": [torch.version, str(torch.lib_dir), torch.cxx11_abi] if torch else None,
            "preload": [self.norm(p) for p in cfg.preload]})

    def key(self, path: Path, rel: str) -> str | None:
        """The key of the file at `path` (None: its closure does not resolve, no reuse)."""
        cfg = self.cfg
        try:
            closures = [self.resolver.closure(path, list(cfg.preload), heads=True)]
            if cfg.interpreter and not cfg.preload:  # an extension or Py*-using file
                closures.append(self.resolver.closure(path, [cfg.interpreter.path], heads=True))
            parts: list[object] = [self.base, rel]
            own = realpath(str(path))
            dwo = self.dwo_names(os.path.dirname(own))
            if dwo is not None:  # split DWARF: the debug-info check looks for its .dwo files
                parts.append(dwo)
            for c in closures:
                if c.missing:
                    return None
                parts.append(self._closure_parts(c, own))
            return digest_of(parts)
        except (OSError, ValueError):
            return None

    def _closure_parts(self, c: Closure, own: str) -> list[object]:
        """The closure as resolved now: a different resolution is a different key. The file
        itself (real path `own`) counts by content, the others by what it sees of them."""
        return [[self.identity(o.path) if realpath(str(o.path)) == own else self.interface(o.path)
                 for o in c.objects],
                [[e.soname, self.norm(e.needed_by), self.norm(e.path)] for e in c.edges]]

    def dwo_names(self, directory: str) -> list[str] | None:
        """The .dwo files beside a split-DWARF library (`<its directory>/.dwo`), by name; None
        where there is no such directory. Names, not bytes: an edit rewrites one unit's .dwo
        and leaves the verdicts of the libraries beside it valid, as their link interfaces do."""
        if directory not in self._dwo:
            base = os.path.join(directory, DWO_DIR)
            self._dwo[directory] = sorted(
                os.path.relpath(os.path.join(d, f), base)
                for d, _dirs, files in os.walk(base) for f in files) if os.path.isdir(base) else None
        return self._dwo[directory]

    def interface(self, path: Path) -> list[object]:
        """An object another file loads: by its link interface when it lies in the tree
        (a rebuilt library with the same exports keeps the key), else as `identity`."""
        real = realpath(str(path))
        if within(real, self.root):
            return ["@" + real[len(self.root) + 1:], "interface",
                    link_interface(self.resolver.elf(Path(real)))]
        return self.identity(path)

    def identity(self, path: Path) -> list[object]:
        """An object by content when it lies in the tree (the manifest's sha256, one this
        process knows, or hashed now for a staged tree), else by its inode's identity."""
        real = realpath(str(path))
        st = os.stat(real)
        if within(real, self.root):
            rel = real[len(self.root) + 1:]
            digest = self.cfg.hashes.get(rel) or remembered_sha256(st)
            if digest is None and self.cfg.hash_members:
                digest = sha256_file(real)
                remember_sha256(st, digest)  # the commit's manifest needs it too
            if digest is not None:
                return ["@" + rel, digest]
        return [real, st.st_dev, *FileSig.of(st)]
