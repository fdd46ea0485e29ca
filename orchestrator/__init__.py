"""orchestrator: locked toolchains, content-addressed builds, atomic variant switches.

The packages, in the order a command flows through them, are LAYERS below: lowest first. A
module may import from its own layer or a lower one, never a higher one; tests/test_layers.py
reads this list, and docs/design.md's layer table is checked against it.
"""

# (layer name, its packages and modules, what it holds). An entry names a package (or a
# top-level module) relative to `orchestrator`; a dotted entry places one module of a package
# lower than the rest of it (the longest listed prefix decides).
LAYERS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("foundations", ("__init__", "errors", "fs", "hashing", "console", "process_group",
                     "fault_point", "model", "memo.file_reads", "memo.state"),
     "errors, atomic files, content hashes, output, schemas; what a piece of work read"),
    ("config", ("config",), "the command line's variables and the Settings built from them"),
    ("store", ("store", "lock"), "the content-addressed store; lock files and their resolution"),
    ("toolchain", ("toolchain", "sources"), "locked toolchains; a recipe's source tree and identity"),
    ("plan", ("plan", "memo"), "derivation and artifact id; remembered answers of repeated commands"),
    ("build", ("builders", "verify", "cache"), "builders, the verifier, the shared cache"),
    ("realise", ("realise",), "store hit, cache substitute, or build -> verify -> commit"),
    ("use", ("workspace", "ide", "bot", "bench"),
     "workspace profiles, IDE/debugger files, the nightly bot, benchmarks"),
    ("verbs", ("verbs",), "one module per `doit <verb>`"),
    ("cli", ("cli",), "doit's tasks, glue and commands; the fast path"),
)
