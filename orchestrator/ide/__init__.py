"""IDE and debugger files for a workspace: .vscode/ (launch, tasks, settings,
c_cpp_properties), CMakePresets.json, .lldbinit / .gdbinit source maps and the
.orch/bin wrappers that run the toolchain's pinned lldb-14 without root.

Everything refers through the workspace links (`.orch/profile`, `.orch/toolchain`), and
debug paths through the logical roots every build compiles in (`/orch/src/<recipe>`,
`/orch/build/<recipe>-<variant>`), so the files hold for any artifact (built here or pulled
from a cache) and a `doit switch` rewrites only what names the variant (tasks.json).

Source maps: `/orch/src/<recipe>` -> the local checkout of the recipe's source;
`/orch/build` -> `.orch/profile/meta/build` (a builder keeps generated sources a debugger
needs at `meta/build/<recipe>-<variant>/<path in the build tree>`).

Ours vs the user's: generated launch configurations and tasks are named `orch: ...`; on a
rewrite those are replaced and every other entry is kept as it was. Settings keys we own are
overwritten, others kept. .lldbinit / .gdbinit keep everything outside our marked block.
Every write is atomic (temp file, fsync, rename) and skipped when the content is unchanged.

Where things are: spec.py (IdeSpec, the resolved inputs), from_plan.py (spec_for: the IdeSpec
of a workspace's plan), jsonc.py (reading and merging VS Code's JSON with comments),
vscode_files.py (launch, tasks, settings, c_cpp_properties), cmake_presets.py,
debugger_init.py (.lldbinit/.gdbinit blocks, the .orch/bin wrappers), render.py (every file's
content, the writes, managed workspaces), variables.py (VS Code's ${...} substitution),
debug_info.py (do the active artifact's libraries carry line tables). The verb is
orchestrator/verbs/vscode.py.
"""
