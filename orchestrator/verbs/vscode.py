"""`doit vscode`: write the workspace's IDE and debugger files for its active profile, and say
whether breakpoints in the active artifact can bind to source lines."""
from __future__ import annotations

from rich.markup import escape

from orchestrator.config.settings import Settings
from orchestrator.ide.debug_info import debug_info_note, debug_info_report
from orchestrator.ide.from_plan import spec_for
from orchestrator.ide.render import write_files
from orchestrator.toolchain.debugger_env import locate
from orchestrator.verbs.output import emit


def cmd_vscode(settings: Settings) -> None:
    spec, active = spec_for(settings)
    changed = write_files(spec)
    report = debug_info_report(active) if active is not None else {}
    note = debug_info_note(spec.variant, report) if active is not None else \
        f"{spec.variant}: no active profile yet; run `doit switch` to debug an artifact"
    tools = locate(spec.deb_root) if spec.deb_root else None
    missing = tools.missing_libraries() if tools else []
    data = {"workspace": str(spec.workspace), "recipe": spec.recipe, "variant": spec.variant,
            "written": [str(p) for p in changed], "debug_info": report, "note": note,
            "lldb_vscode": str(spec.workspace / ".orch/bin/lldb-vscode") if tools else None,
            "lldb_missing_libraries": missing,
            "cuda_gdb": str(spec.workspace / ".orch/bin/cuda-gdb") if spec.cuda_gdb else None}
    lines = [f"vscode: {spec.recipe} {spec.variant} in {spec.workspace}: "
             f"{len(changed)} file(s) written" + (":" if changed else "")]
    # File names are printed as they are (no rich markup inside a path).
    lines += [f"  {escape(str(p.relative_to(spec.workspace) if p.is_relative_to(spec.workspace) else p))}"
              for p in changed]
    lines.append(note)
    if tools is None:
        lines.append("no lldb-14 in the toolchain lock: only the gdb and debugpy "
                     "configurations were written")
    elif missing:
        lines.append(f"[yellow]warning:[/] lldb-14 cannot start here, this machine lacks "
                     f"{', '.join(missing)} (Debian: apt-get install libllvm14 "
                     "libclang-cpp14); the gdb configurations work meanwhile")
    if spec.cuda_gdb is not None:
        lines.append(f"cuda-gdb (CUDA {spec.cuda_version}): .orch/bin/cuda-gdb -x "
                     ".orch/cuda-gdbinit, launch configuration `orch: Python + CUDA (cuda-gdb)`")
    elif spec.cuda_version is not None:
        lines.append(f"no cuda-gdb in the toolchain (CUDA {spec.cuda_version}): no cuda-gdb "
                     "configuration written (cuda-gdb 12.4 comes with locks/cuda12.toml, e.g. "
                     "recipe=cudademo12)")
    emit(settings, data, "\n".join(lines))
