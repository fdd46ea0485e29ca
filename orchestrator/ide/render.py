"""Every IDE file's content (rendered from an IdeSpec, merged with what is there), the writes
(atomic, skipped when unchanged), and the workspaces whose files are managed."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.fs import write_atomic
from orchestrator.ide.cmake_presets import cmake_presets, presets_path
from orchestrator.ide.debugger_init import (
    CUDA_GDB_INIT,
    SCRIPTS_DIR,
    cuda_gdb_wrapper,
    cuda_gdbinit,
    debugger_scripts,
    gdb_wrapper,
    gdbinit_block,
    lldbinit_block,
    replace_block,
    wrappers,
)
from orchestrator.ide.jsonc import dump_json
from orchestrator.ide.managed import STATE_FILE, is_managed
from orchestrator.ide.spec import IdeSpec
from orchestrator.ide.vscode_files import cpp_properties_json, launch_json, settings_json, tasks_json

if TYPE_CHECKING:
    from orchestrator.config.settings import Settings
    from orchestrator.plan.derivation import Plan
    from orchestrator.toolchain.materialize import Toolchain



def write_if_changed(path: Path, text: str, mode: int = 0o644) -> bool:
    """Atomic write unless the file already holds exactly this; True when written."""
    if path.is_file() and not path.is_symlink() and path.read_text() == text \
            and (path.stat().st_mode & 0o777) == mode:
        return False
    write_atomic(path, text, mode)
    return True


def render_files(spec: IdeSpec) -> dict[Path, tuple[str, int]]:
    """Every file's new content and mode; reads (and validates) the existing ones first, so
    a file we cannot merge stops the run before anything is written."""
    vs = spec.workspace / ".vscode"
    out: dict[Path, tuple[str, int]] = {}
    for name, text in wrappers(spec).items():
        out[spec.workspace / ".orch" / "bin" / name] = (text, 0o755)
    gdb = gdb_wrapper(spec)
    if gdb is not None:
        out[spec.workspace / ".orch" / "bin" / "gdb"] = (gdb, 0o755)
    cuda_gdb = cuda_gdb_wrapper(spec)
    if cuda_gdb is not None:
        out[spec.workspace / ".orch" / "bin" / "cuda-gdb"] = (cuda_gdb, 0o755)
        out[spec.workspace / CUDA_GDB_INIT] = (cuda_gdbinit(spec), 0o644)
    for name, text in debugger_scripts().items():
        out[spec.workspace / SCRIPTS_DIR / name] = (text, 0o644)
    out[vs / "launch.json"] = (dump_json(launch_json(spec, vs / "launch.json")), 0o644)
    out[vs / "tasks.json"] = (dump_json(tasks_json(spec, vs / "tasks.json")), 0o644)
    out[vs / "settings.json"] = (dump_json(settings_json(spec, vs / "settings.json")), 0o644)
    out[vs / "c_cpp_properties.json"] = (
        dump_json(cpp_properties_json(spec, vs / "c_cpp_properties.json")), 0o644)
    if spec.configure_args:
        out[presets_path(spec)] = (dump_json(cmake_presets(spec, presets_path(spec))), 0o644)
    for name, block in ((".lldbinit", lldbinit_block(spec)), (".gdbinit", gdbinit_block(spec))):
        p = spec.workspace / name
        out[p] = (replace_block(p.read_text() if p.is_file() else "", block), 0o644)
    out[spec.workspace / ".orch" / STATE_FILE] = (
        dump_json({"managed": True, "recipe": spec.recipe, "variant": spec.variant}), 0o644)
    return out


def stale_files(spec: IdeSpec, rendered: dict[Path, tuple[str, int]]) -> list[Path]:
    """Our files of another toolchain that this one does not have (cuda-gdb's, after a switch
    from a CUDA 12 artifact): present, not rendered now."""
    ours = [spec.workspace / ".orch" / "bin" / "cuda-gdb", spec.workspace / CUDA_GDB_INIT]
    return [p for p in ours if p not in rendered and (p.is_file() or p.is_symlink())]


def write_files(spec: IdeSpec) -> list[Path]:
    """Write every file (atomically, only when changed), remove our stale ones; return those
    written."""
    rendered = render_files(spec)
    for path in stale_files(spec, rendered):
        path.unlink()
    return [path for path, (text, mode) in rendered.items() if write_if_changed(path, text, mode)]


def refresh_if_managed(settings: Settings, plan: Plan | None = None,
                       toolchain: Toolchain | None = None) -> list[Path] | None:
    """After a switch to `plan` (built with `toolchain`, when the caller has it): rewrite the IDE
    files when this workspace's are managed; the files written (None: not managed)."""
    if not is_managed(settings.workspace):
        return None
    from orchestrator.ide.from_plan import spec_for  # the builders: not for every switch

    spec, _ = spec_for(settings, plan, toolchain)
    return write_files(spec)
