"""`doit switch`: make recipe/variant the workspace's profile, realising it first if missing;
`doit switch -`: back to the generation that was active before the last switch or rollback."""
from __future__ import annotations

from orchestrator import fault_point
from orchestrator.config.settings import Settings
from orchestrator.errors import UserError
from orchestrator.ide.render import refresh_if_managed
from orchestrator.memo.file_reads import stat_sig
from orchestrator.memo.plan_memo import ide_reads, remember, tracing_ide
from orchestrator.model.recipe import path_outputs
from orchestrator.realise.pipeline import realise
from orchestrator.store import roots_lock
from orchestrator.store.artifacts import Store
from orchestrator.toolchain.materialize import TOOLCHAIN_JSON
from orchestrator.verbs.output import emit
from orchestrator.verbs.replies import switch_reply
from orchestrator.workspace.activate import activate
from orchestrator.workspace.profiles import Workspace


def switch_back(settings: Settings) -> None:
    """`doit switch -`, like `cd -`: the generation active before the last change."""
    chosen = [n for n in ("recipe", "variant", "source", "targets") if n in settings.vars]
    if chosen:
        raise UserError(f"`doit switch -` returns to the previous generation; it does not take "
                        f"{chosen[0]}= (`doit switch {chosen[0]}=...` without `-`)")
    ws = Workspace(settings.workspace)
    gen = ws.switch_back()
    target = ws.current()
    refresh_if_managed(settings)
    emit(settings, {"generation": gen, "changed": True, "path": str(target)},
         f"switched back: {settings.workspace} generation {gen} → {target.name if target else '?'}")


def cmd_switch(settings: Settings, words: list[str] | None = None) -> None:
    if words:
        if words != ["-"]:
            raise UserError(f"`doit switch` takes no word but `-` (got {' '.join(words)!r}); "
                            "use variant=NAME, or `doit switch -` for the previous generation")
        return switch_back(settings)
    store = Store(settings.store_root)
    with roots_lock.holding(store.root):  # the artifact is a root from commit to link
        r = realise(settings, store)
        # The switch runs nothing from the toolchain: it is linked, its files are not
        # lstat()ed (toolchain.linked_toolchain); whatever runs a program from it checks them.
        toolchain = r.toolchain_to_link()
        fault_point.pause("switch-before-link")
        gen, changed = activate(Workspace(settings.workspace), store, r, toolchain)
    with tracing_ide() as ide:
        written = refresh_if_managed(settings, r.plan, toolchain)  # .vscode/ etc. follow it
    data, human = switch_reply(str(settings.workspace), gen, changed, r.plan.recipe.name,
                               r.plan.variant_name, r.plan.artifact_id, str(r.path), r.origin)
    emit(settings, data, human, markup=False)
    remember(r, {"workspace": str(settings.workspace), "toolchain": str(toolchain.root),
                 "toolchain_sig": stat_sig(str(toolchain.root / TOOLCHAIN_JSON)),
                 "outputs": path_outputs(r.plan.recipe),
                 "ide": ide_reads(ide, written)})
