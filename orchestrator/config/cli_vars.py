"""The command line's variables, declared once: every variable (type, default, one line of
help) and which verbs take which. `doit help <verb>` prints from here and the glue refuses
a variable the verb does not take (exit 2, with a "did you mean" when one is close)."""
from __future__ import annotations

import difflib
from dataclasses import dataclass

from orchestrator.errors import UserError


@dataclass(frozen=True)
class Var:
    name: str
    type: str
    default: str
    help: str


def _vars(*rows: tuple[str, str, str, str]) -> dict[str, Var]:
    return {r[0]: Var(*r) for r in rows}


VARS: dict[str, Var] = _vars(
    ("recipe", "name", "demo", "the recipe, recipes/<name>.toml"),
    ("variant", "name", "relwithdebinfo", "one of the recipe's [variants]"),
    ("source", "path", "(pinned)", "build this checkout instead of the pinned source"),
    ("targets", "list", "(all)", "comma-separated build targets (a partial build)"),
    ("id", "hex", "", "an artifact id: all 40 hex digits, or 6+ of one in the store"),
    ("store", "path", "$ORCH_STORE or artifacts/", "the store root (its parent must exist)"),
    ("create", "bool", "0", "create=1: create store= and its missing parents"),
    ("workspace", "path", "<repo> (or source=)", "the workspace whose profile is used"),
    ("format", "table|json", "table", "json: one JSON document on stdout"),
    ("jobs", "int", "$MAX_JOBS or CPUs", "parallel build jobs"),
    ("substitute", "bool", "1", "0: never ask the caches, build locally"),
    ("commit_failed", "bool", "0", "commit although verify failed"),
    ("rebuild", "bool", "0", "build a present artifact again and compare"),
    ("check", "bool", "0", "build: rebuild elsewhere without caches, exit 1 if bytes differ; "
                           "lock: exit 1 if re-resolving would change a lock"),
    ("compile_cache", "ccache|sccache|off", "ccache", "the compiler launcher's cache"),
    ("keep_going", "bool", "0", "keep building other targets after an error"),
    ("distcc_hosts", "hosts", "(compile-cache.toml)", "distcc hosts, e.g. 'a/4,b/8'; '' for none"),
    ("lock", "name", "(the recipe's)", "one lock, locks/<name>.lock.json (git-sources too)"),
    ("upgrade", "bool", "0", "lock: newest versions the specs allow (else the locked ones kept)"),
    ("toolchain", "bool", "0", "verify: re-hash the materialized toolchain; push/pull: the toolchain"),
    ("keep", "int", "2", "gc: keep the last N generations of every workspace"),
    ("derivation", "bool", "0", "plan: print the derivation's JSON too"),
    ("dry_run", "bool", "0", "gc: show what would be deleted (and what stays, kept by which "
     "root), delete nothing"),
    ("ccache_max", "size", "(unset)", "gc: trim the compile cache to this size, e.g. 5G"),
    ("ccache_evict_older", "age", "(unset)", "gc: evict compile-cache entries older, e.g. 7d"),
    ("all", "bool", "0", "push every stored artifact of the recipe"),
    ("name", "text", "", "the signing key's name"),
    ("config", "path", "nightly.toml", "the nightly matrix file"),
    ("reports", "path", "<store>/reports", "where the nightly reports go"),
    ("push", "bool", "(nightly.toml)", "push the nightly's artifacts to the cache"),
    ("cell", "recipe/variant", "(all)", "nightly: one matrix cell"),
    ("run", "text", "(new)", "nightly: the run id to add to"),
    ("notify", "url", "(none)", "nightly: POST the run summary as JSON to this URL"),
    ("master", "path", "<reports>/buildbot", "nightly buildbot: the Buildbot master directory"),
    ("recipe2", "name", "(recipe=)", "why: the second side's recipe"),
    ("variant2", "name", "(variant=)", "why: the second side's variant"),
    ("source2", "path", "(source=)", "why: the second side's checkout"),
    ("targets2", "list", "(targets=)", "why: the second side's build targets"),
    ("cuda_gdb", "bool", "(toolchain's)", "vscode: 1 requires the cuda-gdb configuration (exit 2 "
     "where the toolchain has no cuda-gdb), 0 leaves it out"),
    ("variants", "list", "", "bench: the two variants to compare, e.g. relwithdebinfo,release"),
    ("ids", "list", "", "bench: the two stored artifacts to compare (6+ hex digits each)"),
    ("rounds", "int", "10", "bench: runs of each side, interleaved A B B A"),
    ("warmup", "int", "1", "bench: runs of each side before the kept ones"),
    ("measure", "wall|cpu|metric", "wall", "bench: what a run yields (metric: see metric=)"),
    ("metric", "key", "", "bench: read this number from the last JSON line the command prints"),
    ("better", "lower|higher", "lower", "bench: which way the measure improves"),
    ("allow_noisy", "bool", "0", "bench: give a verdict although the machine is busy"),
    ("min_effect", "percent", "2", "bench: a ratio within this many % of 1 is no difference "
     "(0: the interval alone decides)"),
    ("plot", "path", ".orch/bench/<a>-vs-<b>.svg", "bench: where the SVG plot goes"),
)

_SELECT = ("recipe", "variant", "source", "targets")
_WHERE = ("store", "create")
_SECOND = ("recipe2", "variant2", "source2", "targets2")  # doit why's second side
_BUILD = ("jobs", "substitute", "commit_failed", "rebuild", "check", "compile_cache",
          "keep_going", "distcc_hosts")

@dataclass(frozen=True)
class Verb:
    doc: str
    vars: tuple[str, ...]
    positional: bool = False  # takes the remaining words (`doit why A B`)
    command: bool = False  # takes a command after `--` (`doit bench ... -- CMD`)


VERBS: dict[str, Verb] = {
    "lock": Verb("Resolve locks/*.toml into locks/*.lock.json (lock=NAME for one; "
                 "recipe=NAME: its [runtime] only).",
                 ("lock", "recipe", "check", "upgrade", *_WHERE)),
    "toolchain": Verb("Materialize the recipe's lock into <store>/toolchains/<hash>/ (venv + debs).",
                      ("recipe", "lock", "substitute", *_WHERE, "format")),
    "build": Verb("Build recipe=NAME variant=NAME into the store (substitute=0 skips caches).",
                  (*_SELECT, *_BUILD, *_WHERE, "format")),
    "verify": Verb("Check the active artifact (or recipe/variant, id=) for ABI, linkage, debug "
                   "info, CUDA archs.",
                   (*_SELECT, "id", "toolchain", "lock", *_WHERE, "workspace", "format")),
    "switch": Verb("Point the workspace's profile at recipe/variant, building it first if "
                   "missing; `doit switch -`: back to what was active before.",
                   (*_SELECT, *_BUILD, *_WHERE, "workspace", "format"), positional=True),
    "rollback": Verb("Return the workspace's profile to the previous generation holding a "
                     "different artifact.", (*_WHERE, "workspace", "format")),
    "status": Verb("Show the workspace's generations, the store's artifacts, toolchains and "
                   "build trees.", (*_WHERE, "workspace", "format")),
    "plan": Verb("Show recipe/variant's id, lock entries and what build would do "
                 "(derivation=1: its derivation too).",
                 (*_SELECT, "substitute", "derivation", *_WHERE, "format")),
    "why": Verb("Why two artifacts differ: doit why ID_A ID_B (stored, 6+ hex digits each), or "
                "doit why variant=release variant2=debug (planned, nothing built).",
                (*_SELECT, *_SECOND, *_WHERE, "format"), positional=True),
    "gc": Verb("Delete what no kept generation needs: artifacts, toolchains, build trees, "
               "sources (dry_run=1 shows it).",
               ("keep", "dry_run", "ccache_max", "ccache_evict_older", *_WHERE, "workspace",
                "format")),
    "push": Verb("Upload recipe/variant (or id=, all=1 for the recipe, toolchain=1 for its "
                 "toolchain) to the cache, signed.",
                 (*_SELECT, "id", "all", "toolchain", "lock", *_WHERE, "format")),
    "pull": Verb("Fetch recipe/variant (or id=, or toolchain=1) from the substituters into the "
                 "store; never builds.",
                 (*_SELECT, "id", "toolchain", "lock", *_WHERE, "format")),
    "cache-keygen": Verb("Write a cache signing key pair (name=...) outside the repo; print the "
                         "public key.", ("name", *_WHERE, "format")),
    "cache-check": Verb("Check the team cache in one go: cache.toml, trusted keys, the signing "
                        "key, reads and a test write.", ("format",)),
    "vscode": Verb("Write .vscode/ (lldb-14, gdb, debugpy), CMakePresets.json, .lldbinit/.gdbinit "
                   "for the profile.", (*_SELECT, "jobs", "cuda_gdb", *_WHERE, "workspace", "format")),
    "nightly": Verb("Build bot: the nightly.toml matrix (jobs=N); `nightly matrix`, cell=R/V, "
                    "`nightly report`, `nightly buildbot`.",
                    ("config", "reports", "push", "cell", "run", "notify", "master", "jobs", "substitute",
                     "compile_cache", "distcc_hosts", "keep_going", *_WHERE, "format"),
                    positional=True),
    "bench": Verb("Compare two artifacts' timings: doit bench variants=a,b (or ids=A,B) -- CMD "
                  "(each in its own environment, interleaved, one CPU).",
                  ("recipe", "variants", "source", "targets", "ids", "rounds", "warmup", "measure",
                   "metric", "better", "allow_noisy", "min_effect", "plot", "jobs", "substitute", "compile_cache",
                   *_WHERE, "workspace", "format"), positional=True, command=True),
    "run": Verb("Run one command in one artifact's environment, without switching: doit run "
                "variant=X -- CMD (or id=).",
                (*_SELECT, "id", "jobs", "substitute", "compile_cache", *_WHERE, "workspace"),
                positional=True, command=True),
}

KNOWN: frozenset[str] = frozenset(VARS)
# Verbs the glue answers before doit selects tasks (doit_glue.run_verb_now): doit reserves the
# name `run` for its own command, so it is no task and `doit list` does not show it.
BEFORE_DOIT: frozenset[str] = frozenset({"run"})
BOOLEANS: frozenset[str] = frozenset(n for n, v in VARS.items() if v.type == "bool")


def close(word: str, choices: list[str] | tuple[str, ...] | frozenset[str]) -> str | None:
    """The nearest of choices to word (difflib, case-insensitive: `Release` finds `release`),
    if any is close."""
    by_lower = {c.lower(): c for c in sorted(choices, reverse=True)}
    found = difflib.get_close_matches(word.lower(), sorted(by_lower), n=1, cutoff=0.6)
    return by_lower[found[0]] if found else None


def did_you_mean(word: str, choices, fmt: str = "{}") -> str:  # noqa: ANN001
    hit = close(word, choices)
    return f"; did you mean {fmt.format(hit)}?" if hit else ""


def check_verb_vars(verb: str, names: list[str]) -> None:
    """UserError for the first variable `verb` does not take (unknown ones first)."""
    if verb not in VERBS:  # a task without a declared table takes what Settings knows
        return
    takes = VERBS[verb].vars
    for name in names:
        if name not in KNOWN and name != "force":
            raise UserError(f"unknown variable {name!r} for `doit {verb}`"
                            + (did_you_mean(name, takes, "{}=") or did_you_mean(name, KNOWN, "{}="))
                            + f" (`doit help {verb}` lists its variables)")
    for name in names:
        if name not in takes and name != "force":
            raise UserError(f"`doit {verb}` does not take {name}="
                            + did_you_mean(name, takes, "{}=")
                            + f"; it takes: {', '.join(takes)} (`doit help {verb}`)")


def verb_help(verb: str) -> str:
    """`doit help <verb>`: its one-line doc, then one line per variable."""
    spec = VERBS[verb]
    rows = [VARS[n] for n in spec.vars]
    words = " -- CMD ..." if spec.command else " WORD ..." if spec.positional else ""
    lines = [f"doit {verb} [name=value ...]{words}", f"  {spec.doc}", "",
             "variables (name=value):"]
    w_name = max((len(v.name) for v in rows), default=0) + 1
    w_type = max((len(v.type) for v in rows), default=0)
    w_def = max((len(v.default) for v in rows), default=0)
    lines += [f"  {v.name + '=':<{w_name}}  {v.type:<{w_type}}  {v.default or '-':<{w_def}}  {v.help}"
              for v in rows]
    return "\n".join(lines)


# doit's own commands, in the order `doit help` lists them after the verbs
DOIT_OWN = ("list", "help", "info", "clean", "forget", "ignore", "dumpdb", "strace",
            "reset-dep", "tabcompletion")


def overview() -> str:
    """`doit help` / `doit -h`: every verb with its one line, then doit's own commands."""
    width = max(len(v) for v in VERBS) + 2
    lines = ["usage: doit VERB [name=value ...]   (from a subdirectory: orch VERB ...)", "",
             "verbs:"]
    lines += [f"  {name:<{width}}{spec.doc}" for name, spec in VERBS.items()]
    lines += ["", f"doit's own commands: {', '.join(DOIT_OWN)} (`doit help COMMAND`)",
              "`doit help VERB` (or `doit VERB -h`) lists a verb's variables with type and default."]
    return "\n".join(lines)
