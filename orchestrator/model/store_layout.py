"""File names of the store's layout that modules below the store share (the store, its
models, the fast path), in a module that imports nothing: naming one costs no model."""

MANIFEST_NAME = "manifest.json"    # <store>/store/<id>-<recipe>-<variant>/manifest.json
TOOLCHAIN_JSON = "toolchain.json"  # <store>/toolchains/<hash>/toolchain.json: it is whole
# <store>/cache/<name>: the stat caches of source files and of the machine check, and the
# machine check's probe answers (pure caches: plan_memo leaves them out of a plan's trace)
SOURCE_STAT_CACHE = "stat-cache.json"
MACHINE_STAT_CACHE = "machine-stat-cache.json"
PROBE_CACHE = "machine-probe-cache.json"
