"""Edit one ATen .cpp of a git checkout of the pinned PyTorch 2.6.0 tree, `doit build`, and the
pinned lldb-14 stops in the edited function called from Python: each phase against upstream's
own path on the same tree, in the same run (issue 27, item 4). Not a test: nothing here
asserts a time.

    .venv/bin/python benchmarks/pytorch_edit_loop.py [--store DIR] [--work DIR] [--rounds 3]
        [--jobs 2] [--recipe pytorch2] [--variant relwithdebinfo] [--targets LIST]
        [--stop line|name]

The checkout (--work/pytorch, kept with --work): recipes/pytorch2.toml's tarball as upstream
ships it, committed to git; the build applies the recipe's overlays and patches to a copy
(`patch_checkouts`). Its first `doit build` is not a sample: on the whole tree, in a store
that built the pinned tree (the default, $ORCH_STORE), it is compile-cache hits of that build
(the same compile lines, the same debug paths) plus every link, the install and verify; in an
empty store it is the whole build (hours).

Each round, ours then upstream's:

1. ours: a fresh edit of `at::native::structured_sub_out::impl` (TORCH_IMPL_FUNC(sub_out) in
   aten/src/ATen/native/BinaryOps.cpp, what `torch.sub` runs on CPU): a new `static volatile`
   counter statement in its body, named by the round, so the object and libtorch_cpu.so
   change and no compile cache has seen it. Timed: `doit build recipe= variant= source=<checkout>`
   (its `✓ <phase>` lines: build = ninja, install, verify, commit; the rest of its wall time is
   the plan, the checkout's identity, its patched copy and the copy into the build tree, split
   at the stamps the two copies write last), then
   `doit switch` with the same selection and `workspace=<work>/ws` (what the generated
   preLaunchTask runs), then the debugger: the workspace's generated `orch: Python + C++
   (lldb-14)` configuration (written once by `doit vscode`) driven over DAP through
   lldb-vscode-14 (tests/dap_client.py), on <work>/edit_loop.py (`import torch;
   torch.sub(...)`), timed from the adapter's start to its 'stopped' event in that function;
   the stop must be in BinaryOps.cpp. The breakpoint is on the edited line of the checkout's
   file, as a click in the editor's gutter sets it (`--stop name`: a function breakpoint on
   FUNCTION, which makes lldb index the libraries it searches).
2. upstream: the same kind of edit again, in the file the build tree compiles
   (<tree>/source/aten/..., the tree's copy of the checkout), then what `setup.py develop`
   runs incrementally, `cmake --build . --target install`, as its two parts: the tree's own
   ninja alone (all targets, the locked ccache as the compile launcher, as ours) and `cmake
   --install <tree> --prefix <work>/upstream/prefix` (the same install scripts; the prefix is
   the only change, as setup.py points it at torch/; installed once before the rounds, so
   each round's install copies what changed, as a developer's does). The tree is configured
   with CMAKE_LINK_DEPENDS_NO_SHARED (builders/relink.py); upstream's CMake relinks every
   target that links libtorch_cpu.so after it, so those are marked stale before upstream's
   ninja (`cmake_default_relinks`) and its one run relinks them. Then the same DAP stop
   with PYTHONPATH at <work>/upstream/prefix/python (the artifact's torch/ Python package,
   copied there once, whose lib/ links to that prefix's lib/). No verify, no commit, no
   switch: upstream has none.

Recompile and link: the edited object's step and the link steps (`*.so*`) that ninja
appended to the tree's .ninja_log, both sides.

Goal (issue 27): ours, edit to the stop (build + switch + debugger), <= the edited file's
recompile (ours, from .ninja_log) + 15 s on 2 cores.

--targets LIST builds a slice instead: `targets=LIST` for doit, ninja on LIST for upstream,
no install of objects. The smallest that commits is c10 and the BinaryOps object (`--targets
c10,caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native/BinaryOps.cpp.o`): the recipe's
verify requires libc10.so's symbol, so the object alone is a failed verify, not committed.
A slice has no libtorch_cpu.so nor torch._C: the switch and debugger rows are skipped (the
table says so) and nothing is linked in the rounds.

Needs .ci/pytorch-prereqs.sh. Whole tree: the lead's store with the pinned 2.6.0 build, e.g.
`--store ~/orch-store --work ~/edit-loop`.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from dap_client import stop_at_line, stop_in_function  # noqa: E402
from pytorch_checkout import (  # noqa: E402
    appended_steps,
    build_tree,
    cache_value,
    checkout,
    developer_env,
    doit,
    doit_build,
    ninja_alone,
    phases,
)

from orchestrator.builders.pytorch_source import SOURCE_COPY_STAMP  # noqa: E402
from orchestrator.builders.relink import link_graph  # noqa: E402
from orchestrator.ide.variables import resolve_variables  # noqa: E402
from orchestrator.sources.prepared import TREE_STAMP  # noqa: E402

EDITED = "aten/src/ATen/native/BinaryOps.cpp"
EDITED_LIBRARY = "lib/libtorch_cpu.so"  # where the edited object is linked
OBJECT = f"caffe2/CMakeFiles/torch_cpu.dir/__/{EDITED}.o"
FUNCTION = "at::native::structured_sub_out::impl"
# The body's first line follows this (2.6.0's TORCH_IMPL_FUNC(sub_out)).
ANCHOR = ("TORCH_IMPL_FUNC(sub_out) (\n"
          "  const Tensor& self, const Tensor& other, const Scalar& alpha, const Tensor& result\n"
          ") {\n")
MARK = re.compile(r"  \{ static volatile int orch_edit_\w+ = 0; orch_edit_\w+ = orch_edit_\w+ \+ 1; \}\n")
SCRIPT = ("import torch\n"
          "a, b = torch.arange(4.0), torch.ones(4)\n"
          "print(torch.sub(a, b, alpha=3).tolist())\n")
CONFIG = "orch: Python + C++ (lldb-14)"
REST = "rest of doit build (plan, identity, source copies)"
TO_PATCHED = "  of which start-up, plan, identity, patched copy"
TO_COPY = "  of which the copy into the build tree"
GOAL_EXTRA_S = 15.0
STOP_TIMEOUT_S = 900.0


def edit(path: Path, token: str) -> None:
    """A new statement in the edited function's body (any earlier one of ours replaced); the
    file is replaced through a temp beside it, so a read-only copy is edited too."""
    text = MARK.sub("", path.read_text())
    if ANCHOR not in text:
        raise SystemExit(f"{path}: TORCH_IMPL_FUNC(sub_out) not found as in 2.6.0; "
                         "this benchmark edits that function")
    line = f"  {{ static volatile int orch_edit_{token} = 0; orch_edit_{token} = orch_edit_{token} + 1; }}\n"
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text.replace(ANCHOR, ANCHOR + line, 1))
    os.replace(tmp, path)


LINKED = re.compile(r"\.so(\.[\d.]+)?$")


def split_steps(steps: list[tuple[list[str], float]]) -> dict[str, float]:
    """The ninja steps of one round, summed: the edited object, the links, the rest (e.g.
    ATen's code generation, which this tree's ninja runs again every time: it declares
    torch/csrc/inductor/aoti_torch/generated/c_shim_cpu.cpp, which it does not write)."""
    out = {"recompile": 0.0, "link": 0.0, "other ninja steps": 0.0}
    for outputs, seconds in steps:
        kind = "recompile" if OBJECT in outputs else \
            "link" if any(LINKED.search(o) for o in outputs) else "other ninja steps"
        out[kind] += seconds
    return out


def cmake_default_relinks(build_dir: Path, library: str) -> list[str]:
    """Upstream's rule, which the orchestrator's configure (CMAKE_LINK_DEPENDS_NO_SHARED,
    builders/relink.py) turns off in this shared tree: a target whose link reads `library`,
    or another target so relinked, relinks after it. Marked stale (mtime 0) before
    upstream's ninja, so that its one run relinks them as CMake's default rule does."""
    _shared, graph = link_graph(build_dir)
    stale = {library}
    grown = True
    while grown:
        grown = False
        for out, libs in graph.items():
            if out not in stale and libs & stale:
                stale.add(out)
                grown = True
    stale.discard(library)
    for out in stale:
        if (build_dir / out).exists():
            os.utime(build_dir / out, ns=(0, 0))
    return sorted(Path(o).name for o in stale)


def links_of(steps: list[tuple[list[str], float]]) -> list[str]:
    return sorted({Path(o).name for outputs, _ in steps for o in outputs if LINKED.search(o)})


def source_copies(store: Path, build_dir: Path, recipe: str, since: float) -> dict[str, float]:
    """Where the rest of a checkout's doit build went, read from the stamps its two source
    copies write last (`patch_checkouts`): from the command's start to the patched copy's stamp
    (<store>/sources/<key>-<recipe>), and from there to the build tree's copy's stamp. Nothing
    when the build made neither (a checkout built in place)."""
    patched = [t for p in (store / "sources").glob(f"*-{recipe}")
               if (p / TREE_STAMP).is_file() and (t := (p / TREE_STAMP).stat().st_mtime) >= since]
    copy = build_dir / SOURCE_COPY_STAMP
    if not patched or not copy.is_file() or copy.stat().st_mtime < max(patched):
        return {}
    return {TO_PATCHED: max(patched) - since, TO_COPY: copy.stat().st_mtime - max(patched)}


def log_size(build_dir: Path) -> int:
    log = build_dir / ".ninja_log"
    return log.stat().st_size if log.is_file() else 0


def debugger_config(ws: Path, script: Path, pythonpath: str | None = None) -> dict:
    """The workspace's generated lldb-14 launch configuration, resolved as VS Code would;
    pythonpath replaces the profile's PYTHONPATH (upstream's layout)."""
    configs = json.loads((ws / ".vscode/launch.json").read_text())["configurations"]
    [config] = [c for c in configs if c["name"] == CONFIG]
    config = resolve_variables(config, ws, script)
    if pythonpath is not None:
        config["env"] = [e for e in config["env"] if not e.startswith("PYTHONPATH=")] + \
            [f"PYTHONPATH={pythonpath}"]
    return config


LOCALS = "debugger: stop → Locals pane (not in edit → stop)"


def edited_line(path: Path) -> int:
    """The line of our statement in the edited file."""
    for n, text in enumerate(path.read_text().splitlines(keepends=True), 1):
        if MARK.fullmatch(text):
            return n
    raise SystemExit(f"{path}: no edit of ours")


def stop(ws: Path, script: Path, how: str, checkout_file: Path, line: int,
         pythonpath: str | None = None) -> tuple[float, float]:
    """Seconds from the adapter's start to the stop in FUNCTION, which must be in EDITED, and
    from the stop to frame 0's variables (the Locals pane: the tensor summaries need the
    complete c10::TensorImpl, which lldb finds through an index of libtorch_cpu.so's DWARF):
    `how` = "line", a breakpoint on the edited line of the checkout's file (a click in the
    gutter; the source map takes it to the build's path), or "name", a function breakpoint."""
    config = debugger_config(ws, script, pythonpath)
    if how == "line":
        s = stop_at_line([config["debugAdapterExecutable"]], config, checkout_file, line,
                         timeout=STOP_TIMEOUT_S)
    else:
        s = stop_in_function(config, FUNCTION, timeout=STOP_TIMEOUT_S)
    top = s.frames[0]
    where = top.get("source", {}).get("path", "")
    if "structured_sub_out" not in top.get("name", "") or not where.endswith("BinaryOps.cpp"):
        raise SystemExit(f"stopped somewhere else: {top}")
    return s.seconds, s.locals_seconds - s.seconds


class Loop:
    """One run's settings and the paths the rounds share."""

    def __init__(self, args: argparse.Namespace, work: Path, store: Path) -> None:
        self.args, self.work, self.store = args, work, store
        self.targets = [t for t in (args.targets or "").split(",") if t]
        self.select = [f"recipe={args.recipe}", f"variant={args.variant}",
                       *([f"targets={args.targets}"] if self.targets else [])]
        self.ws, self.script = work / "ws", work / "edit_loop.py"
        self.upstream = work / "upstream" / "prefix"
        self.tree = checkout(work, store, args.recipe)
        self.last_links: list[str] = []  # what the last round of ours relinked
        self.their_links: list[str] = []  # what upstream's rule relinks beside EDITED_LIBRARY
        self.build_dir = Path()  # the checkout's build tree (prepare: its first build's)

    def ours(self, token: str) -> dict[str, float]:
        edit(self.tree / EDITED, token)
        build_dir = self.build_dir
        before = log_size(build_dir)
        since = time.time()
        wall, err, artifact = doit_build(self.store, self.tree, self.args.jobs, *self.select)
        if build_tree(artifact) != build_dir:
            raise SystemExit(f"{artifact} was built in {build_tree(artifact)}, not in {build_dir}")
        ph = phases(err)
        row = {**split_steps(appended_steps(build_dir / ".ninja_log", before)),
               "ninja (build phase)": ph.get("build", 0.0),
               "install": sum(s for n, s in ph.items() if n.startswith(("install", "torch."))),
               "verify": ph.get("verify", 0.0), "commit": ph.get("commit", 0.0)}
        row[REST] = wall - sum(row[k] for k in ("ninja (build phase)", "install", "verify", "commit"))
        row.update(source_copies(self.store, build_dir, self.args.recipe, since))
        row["build total"] = wall
        if not self.targets:
            t0 = time.perf_counter()
            self.switch()
            row["doit switch (the preLaunchTask's activation)"] = time.perf_counter() - t0
            row["debugger: launch → stop"], row[LOCALS] = stop(
                self.ws, self.script, self.args.stop, self.tree / EDITED,
                edited_line(self.tree / EDITED))
        row["edit → stop"] = wall + row.get("doit switch (the preLaunchTask's activation)", 0.0) \
            + row.get("debugger: launch → stop", 0.0)
        self.last_links = links_of(appended_steps(build_dir / ".ninja_log", before))
        return row

    def theirs(self, token: str) -> dict[str, float]:
        build_dir = self.build_dir
        edit(build_dir / "source" / EDITED, token)
        before = log_size(build_dir)
        if not self.targets:
            self.their_links = cmake_default_relinks(build_dir, EDITED_LIBRARY)
        t_ninja = ninja_alone(self.store, build_dir, self.args.jobs, self.targets)
        row = {**split_steps(appended_steps(build_dir / ".ninja_log", before)),
               "ninja (build phase)": t_ninja}
        if not self.targets:
            row["install"] = self.install(build_dir)
            row["debugger: launch → stop"], row[LOCALS] = stop(
                self.ws, self.script, self.args.stop, self.tree / EDITED,
                edited_line(build_dir / "source" / EDITED), str(self.upstream / "python"))
        row["build total"] = t_ninja + row.get("install", 0.0)
        row["edit → stop"] = row["build total"] + row.get("debugger: launch → stop", 0.0)
        return row

    def switch(self) -> None:
        doit(self.store, "switch", *self.select, f"source={self.tree}", f"workspace={self.ws}",
             "substitute=0", f"jobs={self.args.jobs}")

    def install(self, build_dir: Path) -> float:
        """`cmake --install` of the tree into upstream's prefix (what the install target runs)."""
        cmake = cache_value(build_dir, "CMAKE_COMMAND")
        t0 = time.perf_counter()
        res = subprocess.run([cmake, "--install", str(build_dir), "--prefix", str(self.upstream)],
                             capture_output=True, text=True, env=developer_env(self.store, build_dir))
        if res.returncode:
            raise SystemExit(f"cmake --install failed:\n{(res.stdout + res.stderr)[-2000:]}")
        return time.perf_counter() - t0

    def prepare(self) -> float:
        """Not timed as a sample: the first build, and for the whole tree the workspace
        (switch + vscode), the script, and upstream's prefix installed once with the
        artifact's Python package beside it."""
        subprocess.run(["git", "-C", str(self.tree), "checkout", "-q", "--", EDITED], check=True)
        first, _, artifact = doit_build(self.store, self.tree, self.args.jobs, *self.select)
        self.build_dir = build_tree(artifact)
        if self.targets:
            return first
        self.ws.mkdir(parents=True, exist_ok=True)
        self.script.write_text(SCRIPT)
        self.switch()
        doit(self.store, "vscode", *self.select, f"source={self.tree}", f"workspace={self.ws}")
        self.install(self.build_dir)
        python = self.upstream / "python"
        if python.exists():
            subprocess.run(["chmod", "-R", "u+w", str(python)], check=True)
            shutil.rmtree(python)
        shutil.copytree(self.ws / ".orch/profile/prefix/python", python, symlinks=True)
        subprocess.run(["chmod", "-R", "u+w", str(python)], check=True)
        return first


def median_rows(samples: list[dict[str, float]]) -> dict[str, float]:
    keys = [k for k in samples[0] if all(k in s for s in samples)]
    return {k: statistics.median(s[k] for s in samples) for k in keys}


def report(loop: Loop, ours: dict[str, float], theirs: dict[str, float], load: tuple[float, float]) -> None:
    args = loop.args
    where = f"targets={args.targets}" if loop.targets else "the whole tree"
    table = Table(title=f"edit {EDITED} → build → lldb-14 stop in {FUNCTION} (breakpoint "
                        f"{'on the edited line' if args.stop == 'line' else 'by name'}): {args.recipe} "
                        f"{args.variant}, {where} (median of {args.rounds}; jobs={args.jobs}, "
                        f"{os.cpu_count()} cores, load {load[0]:.1f} → {load[1]:.1f})")
    for col in ("phase", "ours s", "upstream s", "ours / upstream"):
        table.add_column(col, justify="left" if col == "phase" else "right")
    links = ", ".join(loop.last_links) or "none"
    theirs_extra = sorted(set(loop.their_links) - set(loop.last_links))
    names = {"link": f"link (ours: {links}; upstream also: {', '.join(theirs_extra)})"
             if theirs_extra else f"link ({links})"}
    order = ["recompile", "link", "other ninja steps", "ninja (build phase)", "install", "verify",
             "commit", REST, TO_PATCHED, TO_COPY, "build total",
             "doit switch (the preLaunchTask's activation)", "debugger: launch → stop", "edit → stop"]
    for key in order:
        a, b = ours.get(key), theirs.get(key)
        if a is None and b is None:
            if key in ("doit switch (the preLaunchTask's activation)", "debugger: launch → stop"):
                table.add_row(key, "skipped", "skipped", "a slice has no libtorch_cpu.so nor torch._C")
            continue
        ratio = f"{a / b:.2f}" if a is not None and b else "-"
        table.add_row(names.get(key, key), "-" if a is None else f"{a:.2f}",
                      "-" if b is None else f"{b:.2f}", ratio)
    Console(width=150).print(table)
    goal = ours["recompile"] + GOAL_EXTRA_S
    met = ours["edit → stop"] <= goal
    print(f"goal: ours edit → stop {ours['edit → stop']:.1f} s <= recompile {ours['recompile']:.1f} s "
          f"+ {GOAL_EXTRA_S:.0f} s = {goal:.1f} s: {'met' if met else 'MISSED'}"
          + ("" if not loop.targets else " (a slice: no debugger, no link)"))
    print(f"ratio ours / upstream, edit → stop: {ours['edit → stop'] / theirs['edit → stop']:.2f}")
    print(json.dumps({"recipe": args.recipe, "variant": args.variant, "targets": loop.targets,
                      "rounds": args.rounds, "jobs": args.jobs, "load": list(load),
                      "ours_s": ours, "upstream_s": theirs, "goal_s": goal, "goal_met": met,
                      "links": loop.last_links, "upstream_links_also": loop.their_links},
                     ensure_ascii=False))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, default=os.environ.get("ORCH_STORE"),
                    help="the store (default $ORCH_STORE; else <work>/store)")
    ap.add_argument("--recipe", default="pytorch2")
    ap.add_argument("--variant", default="relwithdebinfo")
    ap.add_argument("--work", type=Path, help="keeps the checkout (default: a temp dir)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--stop", choices=("line", "name"), default="line",
                    help="the debugger's breakpoint: on the edited line (default) or by name")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--targets", help="a slice: targets= of doit, ninja's targets upstream")
    args = ap.parse_args()
    if args.rounds < 1 or args.jobs < 1:
        ap.exit(2, "pytorch_edit_loop.py: --rounds and --jobs must be at least 1\n")
    work = args.work or Path(tempfile.mkdtemp(prefix="orch-bench-edit-loop-"))
    work.mkdir(parents=True, exist_ok=True)
    store = Path(args.store).expanduser() if args.store else work / "store"
    try:
        load0 = os.getloadavg()[0]
        loop = Loop(args, work, store)
        first = loop.prepare()
        print(f"first build (not a sample): {first:.1f} s", file=sys.stderr, flush=True)
        stamp = f"{os.getpid()}_{time.time_ns()}"
        ours, theirs = [], []
        for i in range(args.rounds):
            ours.append(loop.ours(f"{stamp}_{i}a"))
            theirs.append(loop.theirs(f"{stamp}_{i}b"))
            print(f"  round {i}: ours {ours[-1]['edit → stop']:.1f} s (recompile "
                  f"{ours[-1]['recompile']:.1f} s), upstream {theirs[-1]['edit → stop']:.1f} s "
                  f"(recompile {theirs[-1]['recompile']:.1f} s)", file=sys.stderr, flush=True)
        subprocess.run(["git", "-C", str(loop.tree), "checkout", "-q", "--", EDITED], check=True)
        report(loop, median_rows(ours), median_rows(theirs), (load0, os.getloadavg()[0]))
    finally:
        if args.work is None:
            subprocess.run(["chmod", "-R", "u+w", str(work)], check=False)
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
