"""Workspace profiles: generations of links into the store, switched by one rename().

<ws>/.orch/profile -> profile-N-link -> <store>/store/<id>-<recipe>-<variant>
Everything in the workspace (env.sh, IDE files, compile_commands.json) refers through
.orch/profile, so switching never rewrites them and costs the same for any artifact size.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

from orchestrator.errors import UserError
from orchestrator.fs import atomic_symlink, is_stale_temp, write_atomic
from orchestrator.model.store_layout import MANIFEST_NAME
from orchestrator.store import roots_lock
from orchestrator.store.artifacts import Store
from orchestrator.workspace.links import apply_links, prune_links

GEN_RE = re.compile(r"^profile-(\d+)-link$")


class Workspace:
    def __init__(self, root: Path) -> None:
        self.root = Path(root).absolute()
        self.orch = self.root / ".orch"
        self.profile = self.orch / "profile"
        self.toolchain_link = self.orch / "toolchain"
        self.env_script = self.orch / "env.sh"
        self.previous = self.orch / "previous"  # -> the generation link active before the last change

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """One process at a time changes the workspace's links: flock(2) on .orch/.lock, the
        lock filelock's FileLock takes on Linux (so either kind of holder excludes the
        other), without importing filelock on every switch."""
        self.orch.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.orch / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def clean_stale(self) -> list[Path]:
        """Remove .orch/ temp files (`.<name>.tmp-<pid>-<hex>`, and the root's
        compile_commands.json one) of processes that are gone: what a kill between the write
        and the rename leaves behind."""
        removed: list[Path] = []
        if not self.orch.is_dir():
            return removed
        ours = [*self.orch.iterdir(), *self.root.glob(".compile_commands.json.tmp-*")]
        for p in ours:
            if p.name.startswith(".") and is_stale_temp(p.name):
                p.unlink(missing_ok=True)
                removed.append(p)
        return removed

    def generations(self) -> dict[int, Path]:
        """Generation number -> the store path it points at."""
        gens: dict[int, Path] = {}
        if not self.orch.is_dir():
            return gens
        for p in self.orch.iterdir():
            m = GEN_RE.match(p.name)
            if m and p.is_symlink():
                gens[int(m[1])] = Path(os.readlink(p))
        return dict(sorted(gens.items()))

    def current_generation(self) -> int | None:
        if not self.profile.is_symlink():
            return None
        m = GEN_RE.match(os.readlink(self.profile))
        return int(m[1]) if m else None

    def current(self) -> Path | None:
        gen = self.current_generation()
        return self.generations().get(gen) if gen is not None else None

    def _gen_link(self, n: int) -> Path:
        return self.orch / f"profile-{n}-link"

    def switch(self, artifact: Path, store: Store, toolchain_root: Path | None,
               outputs: dict[str, list[str]]) -> tuple[int, bool]:
        """Make artifact the active profile; returns (generation, changed)."""
        artifact = artifact.absolute()
        with self._lock(), roots_lock.holding(store.root):  # no gc between here and the link
            if not (artifact / MANIFEST_NAME).is_file():
                raise UserError(f"{artifact} is no longer in the store (a gc removed it); "
                                "run the command again")
            self.clean_stale()
            self.register(store)
            if toolchain_root is not None:
                if not self.toolchain_link.is_symlink() or \
                        Path(os.readlink(self.toolchain_link)) != toolchain_root:
                    atomic_symlink(toolchain_root, self.toolchain_link)
            self.write_env(outputs)
            self.link_compile_commands()
            links = apply_links(self.root, self.orch, artifact)  # through .orch/profile
            cur = self.current_generation()
            gens = self.generations()
            if cur is not None and gens.get(cur) == artifact:
                prune_links(self.root, self.orch, links)
                return cur, False
            n = max(gens, default=0) + 1
            atomic_symlink(artifact, self._gen_link(n))
            self._activate(n, cur)
            prune_links(self.root, self.orch, links)
            return n, True

    def _activate(self, n: int, cur: int | None) -> None:
        """Profile -> generation n; `previous` remembers cur for `doit switch -`."""
        if cur is not None and cur != n:
            atomic_symlink(self._gen_link(cur).name, self.previous)
        atomic_symlink(self._gen_link(n).name, self.profile)

    def _move_to(self, n: int, cur: int | None) -> None:
        links = apply_links(self.root, self.orch, self.generations()[n])
        self._activate(n, cur)
        prune_links(self.root, self.orch, links)

    def rollback(self) -> tuple[int, list[int]]:
        """Back to the newest earlier generation whose artifact differs from the active one:
        (that generation, the earlier ones skipped because they hold the same artifact)."""
        with self._lock():
            self.clean_stale()
            cur = self.current_generation()
            if cur is None:
                raise UserError(f"{self.root}: no active profile to roll back from; run `doit switch` first")
            gens = self.generations()
            earlier = [g for g, target in gens.items() if g < cur and target.exists()]
            differ = [g for g in earlier if gens[g] != gens.get(cur)]
            if not differ:
                raise UserError(f"{self.root}: no generation before {cur} holds a different artifact; "
                                "nothing to roll back to (`doit status` lists them)")
            prev = max(differ)
            self._move_to(prev, cur)
            return prev, [g for g in earlier if g > prev]

    def switch_back(self) -> int:
        """`doit switch -`: the generation that was active before the last switch/rollback."""
        with self._lock():
            self.clean_stale()
            m = GEN_RE.match(os.readlink(self.previous)) if self.previous.is_symlink() else None
            gens = self.generations()
            if m is None or int(m[1]) not in gens or not gens[int(m[1])].exists():
                raise UserError(f"{self.root}: no earlier active generation to return to; "
                                "`doit switch variant=NAME` picks one")
            self._move_to(int(m[1]), self.current_generation())
            return int(m[1])

    def register(self, store: Store) -> None:
        """Record this workspace as a gc root of the store."""
        store.gcroots_dir.mkdir(parents=True, exist_ok=True)
        key = hashlib.sha256(str(self.root).encode()).hexdigest()[:16]
        link = store.gcroots_dir / key
        if not link.is_symlink() or Path(os.readlink(link)) != self.orch:
            atomic_symlink(self.orch, link)

    def write_env(self, outputs: dict[str, list[str]]) -> None:
        """env.sh puts the toolchain and the profile's outputs on the paths, via the links."""
        def joined(dirs: list[str]) -> str:
            return ":".join(f"$ORCH_PROFILE/prefix/{d}" for d in dirs)

        # The prefix's python dirs, then the entry's locked runtime requirements (RUNTIME_SITE).
        python_path = ":".join([*filter(None, [joined(outputs["python"])]),
                                *(f"$ORCH_PROFILE/{d}" for d in outputs.get("runtime", []))])

        text = (
            "# Generated by orchestrator. Source once: `. .orch/env.sh`; it refers through\n"
            "# .orch/profile, so every later `doit switch` / `doit rollback` takes effect at once.\n"
            f"export ORCH_WORKSPACE={shlex.quote(str(self.root))}\n"
            f"export ORCH_PROFILE={shlex.quote(str(self.profile))}\n"
            f"export ORCH_TOOLCHAIN={shlex.quote(str(self.toolchain_link))}\n"
            f'export PATH="$ORCH_TOOLCHAIN/venv/bin:{joined(outputs["bin"])}:$PATH"\n'
            f'export PYTHONPATH="{python_path}${{PYTHONPATH:+:$PYTHONPATH}}"\n'
            "# No LD_LIBRARY_PATH: it beats every library's RUNPATH, so a process that imports\n"
            "# another artifact (PYTHONPATH at it) would load this profile's libraries with it.\n"
            "# Artifacts find their own libraries through RUNPATH; run another one with\n"
            "# `doit run variant=X -- CMD`. Link your own programs with -Wl,-rpath.\n"
            "# Store entries are immutable: Python must not write __pycache__ into them.\n"
            "export PYTHONDONTWRITEBYTECODE=1\n"
        )
        if not self.env_script.is_file() or self.env_script.read_text() != text:
            write_atomic(self.env_script, text)

    def link_compile_commands(self) -> None:
        """compile_commands.json at the workspace root follows the profile (for clangd)."""
        link = self.root / "compile_commands.json"
        target = Path(".orch") / "profile" / "meta" / "compile_commands.json"
        if link.exists() and not link.is_symlink():
            return  # the user's own file: leave it
        if not link.is_symlink() or Path(os.readlink(link)) != target:
            atomic_symlink(target, link)


def gc_roots(store: Store, keep: int) -> list[Path]:
    """Store paths referenced by the last `keep` generations (and the current one) of every
    registered workspace."""
    roots: list[Path] = []
    if not store.gcroots_dir.is_dir():
        return roots
    for link in store.gcroots_dir.iterdir():
        orch = Path(os.readlink(link)) if link.is_symlink() else None
        if orch is None or not orch.is_dir():
            link.unlink(missing_ok=True)  # the workspace is gone
            continue
        ws = Workspace(orch.parent)
        gens = ws.generations()
        kept = sorted(gens)[-keep:] if keep > 0 else []
        cur = ws.current_generation()
        if cur is not None:
            kept.append(cur)
        roots += [gens[g] for g in kept if g in gens]
    return roots
