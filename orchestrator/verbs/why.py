"""`doit why`: the derivation difference between two artifacts, either two stored ones
(`doit why A B`, each named by the id= rule of orchestrator.plan.artifact_ref) or two variable
sets planned like `doit plan`, nothing built (`doit why variant=release variant2=debug`: the
second side's recipe2=/variant2=/source2=/targets2=, each defaulting to the first side's).
The diff: orchestrator.realise.explain."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from orchestrator.config.settings import Settings
from orchestrator.errors import UserError
from orchestrator.plan.artifact_ref import find_stored
from orchestrator.plan.derivation import make_plan
from orchestrator.realise.explain import Change, derivation_diff
from orchestrator.sources.listing import TreeChanges, tree_changes
from orchestrator.store.artifacts import Store
from orchestrator.verbs.output import emit

# The second side's variables and the first side's they stand for.
SECOND_SIDE = {"recipe2": "recipe", "variant2": "variant", "source2": "source",
               "targets2": "targets"}
SELECTION = tuple(SECOND_SIDE.values())


@dataclass(frozen=True)
class Side:
    """One side of the comparison."""
    id: str
    name: str  # <id>-<recipe>-<variant>, as a store entry is named
    derivation: dict[str, Any]


def stored_sides(settings: Settings, ids: list[str]) -> tuple[Side, Side]:
    """Two stored artifacts' derivations (doit why A B)."""
    if len(ids) != 2:
        raise UserError(f"why: give two artifact ids (doit why A B) or a second variable set "
                        f"(variant2=, recipe2=, source2=, targets2=), got {len(ids)} id(s)")
    store = Store(settings.store_root)
    a, b = (Store.read_manifest(find_stored(store, x, label="why: ")) for x in ids)
    return Side(a.id, a.name, a.derivation), Side(b.id, b.name, b.derivation)


def planned_sides(settings: Settings) -> tuple[Side, Side]:
    """Both variable sets planned as `doit plan` plans (no toolchain, nothing built)."""
    # workspace= as given or derived for the command (a side's source= never moves it)
    first = {"workspace": str(settings.workspace),
             **{k: v for k, v in settings.vars.items() if k not in SECOND_SIDE}}
    second = {**first, **{SECOND_SIDE[k]: v for k, v in settings.vars.items() if k in SECOND_SIDE}}
    store = Store(settings.store_root)
    sides = []
    for label, variables in (("the first side", first), ("the second side", second)):
        try:
            plan = make_plan(Settings.from_vars(settings.repo_root, variables), store)
        except UserError as e:
            message = str(e) if variables is first else second_side_names(str(e), settings)
            raise UserError(f"why: {label}: {message}") from None
        sides.append(Side(plan.artifact_id, plan.name, plan.derivation))
    return sides[0], sides[1]


def second_side_names(message: str, settings: Settings) -> str:
    """The second side's message names its own variable (`source2=...`, not `source=...`)."""
    for name, first in SECOND_SIDE.items():
        if name in settings.vars and message.startswith(f"{first}="):
            return name + message[len(first):]
    return message


def sides_of(settings: Settings, ids: list[str]) -> tuple[bool, Side, Side]:
    """(planned?, a, b) from the ids or the variable sets; a wrong mix is a UserError."""
    second = [n for n in SECOND_SIDE if n in settings.vars]
    first = [n for n in SELECTION if n in settings.vars]
    if ids and (first or second):
        raise UserError(f"why: give two artifact ids or two variable sets, not both "
                        f"({(first or second)[0]}= with ids); e.g. doit why variant=release "
                        f"variant2=debug")
    if not ids and first and not second:
        raise UserError(f"why: {first[0]}= names the first side; name the second with "
                        f"{first[0]}2= (e.g. doit why variant=release variant2=debug)")
    if second:
        return (True, *planned_sides(settings))
    return (False, *stored_sides(settings, ids))


def cmd_why(settings: Settings, ids: list[str]) -> dict[str, Any]:
    """Print the derivation difference of two artifacts: doit why A B (stored), or doit why
    variant=release variant2=debug (planned)."""
    planned, a, b = sides_of(settings, ids)
    changes = derivation_diff(a.derivation, b.derivation)
    lines = [f"{a.name} → {b.name}: " + (f"{len(changes)} difference(s)" if changes
                                          else "same derivation")]
    rows = []
    for c in changes:
        row, files = asdict(c), source_files(settings, c)
        lines.append(f"  {c.line()}")
        if files is not None:
            row["files"] = asdict(files)
            lines += [f"    {ln}" for ln in files.lines(FILES_SHOWN)]
        rows.append(row)
    report = {"a": a.id, "b": b.id, "a_name": a.name, "b_name": b.name,
              "sides": "planned" if planned else "stored", "changes": rows}
    emit(settings, report, "\n".join(lines), markup=False)
    return report


FILES_SHOWN = 10  # a changed source tree's files named in the text (format=json: all)


def source_files(settings: Settings, change: Change) -> TreeChanges | None:
    """The files behind a changed source tree digest, when both trees' lists are kept."""
    if change.op != "~" or not change.path.endswith("tree_sha256"):
        return None
    if not (isinstance(change.old, str) and isinstance(change.new, str)):
        return None
    return tree_changes(settings.store_root, change.old, change.new)
