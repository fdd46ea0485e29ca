"""File names of the store's layout that modules below the store share (the store, its
models, the fast path), in a module that imports nothing: naming one costs no model."""

MANIFEST_NAME = "manifest.json"    # <store>/store/<id>-<recipe>-<variant>/manifest.json
TOOLCHAIN_JSON = "toolchain.json"  # <store>/toolchains/<hash>/toolchain.json: it is whole
