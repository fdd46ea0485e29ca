"""IdeSpec: everything the IDE and debugger files are generated from, resolved, and how
its paths read from VS Code (${workspaceFolder}/...) and from a shell (absolute)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.model.logical_paths import LOGICAL_BUILD_ROOT, logical_source

WS = "${workspaceFolder}"


@dataclass(frozen=True)
class IdeSpec:
    """Everything the files are generated from, resolved (no I/O needed to render)."""

    workspace: Path
    repo_root: Path
    recipe: str
    variant: str
    variants: list[str]
    source_dir: Path                          # the local checkout of the recipe's source
    toolchain_root: Path
    toolchain_python: Path                    # the venv's python (inside toolchain_root)
    deb_root: Path | None                     # unpacked debs (lldb-14), None: no lldb pinned
    cmake: Path
    ninja: Path
    cc: Path
    cxx: Path
    outputs: Mapping[str, list[str]]          # recipe outputs: lib / bin / python dirs
    configure_args: Mapping[str, list[str]]   # variant -> the builder's cmake args
    doit: list[str]                           # argv that runs this repo's doit
    gdb: Path | None = None
    # The toolchain's cuda-gdb (CUDA 12.4's, locks/cuda12.toml [cuda.gdb]); None: none pinned,
    # or left out (`doit vscode cuda_gdb=0`). cuda_version: the locked toolkit's, if any.
    cuda_gdb: Path | None = None
    cuda_version: str | None = None
    extra_env: Mapping[str, str] = field(default_factory=dict)
    # Where the active artifact's debug info names its source, when not /orch/src/<recipe>
    # (an artifact built before issue 33 from a per-build source copy inside the build tree:
    # /orch/build/<recipe>-<variant>/source).
    source_logical: str | None = None
    # What selects the active artifact besides recipe/variant (targets=, source=): the
    # preLaunchTask rebuilds exactly that artifact.
    select_vars: list[str] = field(default_factory=list)
    # The developer's checkout when source_dir is its patched copy in the store (`source=PATH`
    # with `patch_checkouts`): the file open in the editor, where a gutter click sets a
    # breakpoint, so the debuggers map the debug info's paths to it first.
    checkout_dir: Path | None = None

    # -- paths as VS Code (${workspaceFolder}) and as the shell (absolute) see them ---------
    def ws(self, rel: str, absolute: bool) -> str:
        return str(self.workspace / rel) if absolute else f"{WS}/{rel}"

    def under_ws(self, path: Path) -> str:
        """path as VS Code sees it: ${workspaceFolder}/... when inside the workspace."""
        try:
            rel = Path(path).relative_to(self.workspace).as_posix()
        except ValueError:
            return str(path)
        return WS if rel == "." else f"{WS}/{rel}"

    def tool(self, path: Path) -> str:
        """A toolchain program through the workspace's `.orch/toolchain` link."""
        try:
            return self.ws(f".orch/toolchain/{Path(path).relative_to(self.toolchain_root).as_posix()}",
                           absolute=False)
        except ValueError:
            return str(path)

    def source(self, absolute: bool) -> str:
        try:
            rel = self.source_dir.relative_to(self.workspace)
        except ValueError:
            return str(self.source_dir)
        if absolute:
            return str(self.source_dir)
        return WS if rel == Path(".") else f"{WS}/{rel.as_posix()}"

    def python(self, absolute: bool) -> str:
        rel = self.toolchain_python.relative_to(self.toolchain_root).as_posix()
        return self.ws(f".orch/toolchain/{rel}", absolute)

    def source_map(self, absolute: bool) -> list[tuple[str, str]]:
        """(path in debug info, local path) pairs. lldb rejects a map to a missing directory
        (and stops reading the file), so the build root is mapped only when the active
        artifact keeps generated sources (meta/build)."""
        pairs = []
        logical = logical_source(self.recipe)
        if self.checkout_dir is not None and self.checkout_dir != self.source_dir:
            pairs.append((logical, str(self.checkout_dir) if absolute else self.under_ws(self.checkout_dir)))
        if self.source_logical and self.source_logical != logical:
            pairs.append((self.source_logical, self.source(absolute)))
        pairs.append((logical, self.source(absolute)))
        # Generated sources the artifact keeps at their logical path (lldb tries each
        # matching map in order and takes the first file that exists).
        if (self.workspace / f".orch/profile/meta/src/{self.recipe}").is_dir():
            pairs.append((logical_source(self.recipe),
                          self.ws(f".orch/profile/meta/src/{self.recipe}", absolute)))
        if (self.workspace / ".orch/profile/meta/build").is_dir():
            pairs.append((LOGICAL_BUILD_ROOT, self.ws(".orch/profile/meta/build", absolute)))
        return pairs

    def env(self, absolute: bool) -> dict[str, str]:
        """The debuggee's environment: the profile's outputs on the paths, like .orch/env.sh,
        and like it no LD_LIBRARY_PATH: it would beat every library's RUNPATH, so a debuggee
        pointed at another artifact would load the active one's libraries beside its own."""
        def joined(kind: str) -> str:
            return ":".join(self.ws(f".orch/profile/prefix/{d}", absolute)
                            for d in self.outputs.get(kind, []))
        runtime = [self.ws(f".orch/profile/{d}", absolute) for d in self.outputs.get("runtime", [])]
        env = {"PYTHONPATH": ":".join(filter(None, [joined("python"), *runtime]))}
        if not absolute:  # VS Code expands ${env:PATH}; lldb/gdb inherit PATH as it is
            bins = [self.ws(".orch/toolchain/venv/bin", absolute), joined("bin"), "${env:PATH}"]
            env = {"PATH": ":".join(filter(None, bins)), **env}
        env.update(self.extra_env)
        return {k: v for k, v in env.items() if v}


def presets_binary_dir_for(workspace: Path, recipe: str, variant: str) -> Path:
    """Where CMake Tools builds a variant (kept apart from the orchestrator's build trees)."""
    return workspace / ".orch" / "cmake-build" / f"{recipe}-{variant}"
