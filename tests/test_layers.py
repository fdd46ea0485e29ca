"""The package's import structure: no import circles, and no import from a lower layer to a
higher one. Imports inside functions and under TYPE_CHECKING count too: a lazy import is
still a dependency, and hiding a circle in a function only moves the failure to run time.

Read from the source (ast), nothing is imported; each test reports every violation at once.
"""
from __future__ import annotations

import ast
from pathlib import Path

import orchestrator

PACKAGE = Path(__file__).resolve().parents[1] / "orchestrator"

# Lowest first, from the package itself (orchestrator.LAYERS). A module may import modules of
# its own layer or of lower ones. A module belongs to the layer of the longest prefix listed
# for it ("orchestrator." left out).
LAYERS: list[list[str]] = [list(names) for _, names, _ in orchestrator.LAYERS]


def module_names() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's __init__)."""
    out = {}
    for p in sorted(PACKAGE.rglob("*.py")):
        parts = list(p.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (p, is_pkg)
    return out


def imports_of(name: str, mods: dict[str, tuple[Path, bool]]) -> dict[str, int]:
    """The package's modules `name` imports (anywhere in the file) -> first line doing so."""
    path, is_pkg = mods[name]
    here = name if is_pkg else name.rpartition(".")[0]
    found: dict[str, int] = {}

    def add(target: str, line: int) -> None:
        while target and target not in mods:  # `import a.b.c` of a name inside a module
            target = target.rpartition(".")[0]
        if target.startswith("orchestrator") and target != name:
            found.setdefault(target, line)

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                add(a.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package, up level - 1 packages
                up = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            subs = [f"{base}.{a.name}" for a in node.names]
            for s in subs:
                if s in mods:
                    add(s, node.lineno)
            if any(s not in mods for s in subs):  # names read from `base` itself
                add(base, node.lineno)
    return found


def graph() -> dict[str, dict[str, int]]:
    mods = module_names()
    return {m: imports_of(m, mods) for m in mods}


def components(g: dict[str, dict[str, int]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)

    for v in sorted(g):
        if v not in index:
            visit(v)
    return comps


def cycles(g: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle per circle, from its smallest module back to it."""
    return [cycle_through(g, comp) for comp in components(g)]


def cycle_through(g: dict[str, dict[str, int]], comp: set[str]) -> list[str]:
    """One shortest cycle from the component's smallest member back to it (breadth first)."""
    start = min(comp)
    paths = {start: [start]}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(g[v]):
            if w == start:
                return paths[v] + [start]
            if w in comp and w not in paths:
                paths[w] = paths[v] + [w]
                todo.append(w)
    raise AssertionError(f"no cycle through {start}")


def layer_of(module: str) -> int | None:
    rel = module.removeprefix("orchestrator").removeprefix(".") or "__init__"
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for i, names in enumerate(LAYERS):
        for n in names:
            if rel == n or rel.startswith(n + "."):
                if best is None or len(n) > best[0]:
                    best = (len(n), i)
    return None if best is None else best[1]


def short(m: str) -> str:
    return m.removeprefix("orchestrator.")


def test_no_import_circles() -> None:
    g = graph()
    found = components(g)
    assert not found, f"{len(found)} import circle(s):\n" + "\n".join(
        f"  {' -> '.join(map(short, cycle_through(g, c)))}  (in the circle: "
        f"{', '.join(sorted(map(short, c)))})" for c in found)


def test_every_module_has_a_layer() -> None:
    missing = sorted(short(m) for m in graph() if layer_of(m) is None)
    assert not missing, f"add these modules to LAYERS in {Path(__file__).name}: {missing}"


def test_no_import_from_a_lower_layer_to_a_higher_one() -> None:
    mods = module_names()
    bad = []
    for m, targets in sorted(graph().items()):
        lm = layer_of(m)
        for t, line in sorted(targets.items()):
            lt = layer_of(t)
            if lm is not None and lt is not None and lt > lm:
                where = mods[m][0].relative_to(PACKAGE.parent)
                bad.append(f"  {where}:{line}: {short(m)} (layer {lm}) imports {short(t)} "
                           f"(layer {lt})")
    assert not bad, f"{len(bad)} import(s) from a lower layer to a higher one:\n" + "\n".join(bad)


def test_the_cycle_finder_reports_each_circle_once() -> None:
    g = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 1}}
    assert cycles(g) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b": 1}, "b": {}}) == []


def test_layer_of_takes_the_longest_prefix() -> None:
    assert layer_of("orchestrator") == 0
    assert layer_of("orchestrator.verify.checks.cuda") == layer_of("orchestrator.verify")
    assert layer_of("orchestrator.verbs.plan") > layer_of("orchestrator.plan.derivation")
    assert layer_of("orchestrator.planner") is None


def test_imports_inside_functions_and_relative_ones_count(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "one.py").write_text(
        "def f():\n    from orchestrator.pkg import two\n    from .three import X\n")
    mods = {"orchestrator.pkg.one": (tmp_path / "pkg" / "one.py", False),
            "orchestrator.pkg.two": (tmp_path / "two.py", False),
            "orchestrator.pkg.three": (tmp_path / "three.py", False)}
    assert imports_of("orchestrator.pkg.one", mods) == {"orchestrator.pkg.two": 2,
                                                        "orchestrator.pkg.three": 3}


def test_no_module_over_350_lines() -> None:
    """One concern per module: a module past ~350 lines holds several (issue 14)."""
    long = {str(p.relative_to(PACKAGE.parent)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 350}
    assert not long, f"modules over 350 lines (split them by concern): {long}"


def runtime_uses_of_type_checking_names(path: Path) -> list[str]:
    """Names imported only under `if TYPE_CHECKING:` but used at run time (outside
    annotations, in a function without its own import of them): a NameError waiting for the
    path that reaches them."""
    tree = ast.parse(path.read_text(), str(path))
    typing_only: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for n in ast.walk(node):
                if isinstance(n, (ast.Import, ast.ImportFrom)):
                    typing_only |= {(a.asname or a.name).split(".")[0] for a in n.names}
    if not typing_only:
        return []
    in_annotation = {id(x) for n in ast.walk(tree) for attr in ("annotation", "returns")
                     if getattr(n, attr, None) is not None for x in ast.walk(getattr(n, attr))}
    found: list[str] = []

    def visit(scope: ast.AST, imported_here: set[str]) -> None:
        for n in ast.iter_child_nodes(scope):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                local = {(a.asname or a.name).split(".")[0] for m in ast.walk(n)
                         if isinstance(m, (ast.Import, ast.ImportFrom)) for a in m.names}
                visit(n, imported_here | local)
            elif scope is tree and isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
                continue
            else:
                if (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in typing_only
                        and id(n) not in in_annotation and n.id not in imported_here):
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{n.lineno}: {n.id}")
                visit(n, imported_here)

    visit(tree, set())
    return found


def test_names_imported_for_typing_only_are_not_used_at_run_time() -> None:
    """Lazy imports keep start-up short (issue 12); a name moved under TYPE_CHECKING must not
    still be called (it was: a failed build raised NameError instead of its message)."""
    found = [f for p in sorted(PACKAGE.rglob("*.py")) for f in runtime_uses_of_type_checking_names(p)]
    assert not found, "imported only under TYPE_CHECKING but used at run time:\n" + "\n".join(found)


def test_the_top_level_holds_packages_and_at_most_eight_modules() -> None:
    """The layers are packages (issue 28): a newcomer reads the flow from orchestrator/'s
    listing, not from a flat list of modules."""
    singles = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(singles) <= 8, f"orchestrator/ holds {len(singles)} single-file modules: {singles}"
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    listed = {n.split(".")[0] for _, names, _ in orchestrator.LAYERS for n in names}
    assert packages <= listed, f"packages missing from orchestrator.LAYERS: {packages - listed}"


def layer_table() -> str:
    rows = ["| layer | packages and modules | what they hold |", "|---|---|---|"]
    for name, members, what in orchestrator.LAYERS:
        rows.append(f"| {name} | {', '.join(f'`{m}`' for m in members)} | {what} |")
    return "\n".join(rows)


def test_the_design_page_shows_the_layers_this_test_enforces() -> None:
    """One list drives the check and the docs: docs/design.md's table is orchestrator.LAYERS."""
    text = (PACKAGE.parent / "docs" / "design.md").read_text()
    begin = "<!-- layers: generated from orchestrator.LAYERS; tests/test_layers.py checks it -->\n"
    shown = text[text.index(begin) + len(begin):text.index("\n<!-- /layers -->")]
    assert shown == layer_table(), f"docs/design.md's layer table is stale; it should read:\n{layer_table()}"
