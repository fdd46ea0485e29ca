"""File names of the store's layout that modules below the store share (the store, its
models, the fast path), in a module that imports nothing of ours: naming one costs no model."""
from __future__ import annotations

from pathlib import Path

MANIFEST_NAME = "manifest.json"    # <store>/store/<id>-<recipe>-<variant>/manifest.json
TOOLCHAIN_JSON = "toolchain.json"  # <store>/toolchains/<hash>/toolchain.json: it is whole
# <store>/cache/<name>: the stat caches of source files and of the machine check, and the
# machine check's probe answers (pure caches: plan_memo leaves them out of a plan's trace)
SOURCE_STAT_CACHE = "stat-cache.json"
MACHINE_STAT_CACHE = "machine-stat-cache.json"
PROBE_CACHE = "machine-probe-cache.json"
MEMO_DIR = "plan-memo"             # <store>/cache/plan-memo/<key>.json: one per memoized command
LISTING_DIR = "source-trees"       # <store>/cache/source-trees/<sha256>.json: a tree's listing
QUICK_DIR = "toolchain-quick"      # <store>/cache/toolchain-quick/: tree_manifest.read_quick's copies


class StorePaths:
    """Every directory of a store and its cache files, named once (docs/contracts.md's store
    layout). Paths only: nothing is created or read here."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.store = root / "store"            # committed artifacts, read-only
        self.tmp = root / "tmp"                # staging; failed-<id>-... kept builds
        self.build = root / "build"            # persistent build trees
        self.toolchains = root / "toolchains"  # materialized locks
        self.links = root / "links"            # the dedupe pool
        self.locks = root / "locks"            # filelock files; roots.lock
        self.gcroots = root / "gcroots"        # workspaces whose profiles are gc roots
        self.cache = root / "cache"            # pure caches: stat caches, memos, listings
        self.git = root / "git"                # bare mirrors of git sources
        self.sources = root / "sources"        # prepared (patched, pinned) source trees
        self.archives = root / "archives"      # downloaded source archives
        self.ccache = root / "ccache"          # the local compile cache (ccache)
        self.sccache = root / "sccache"        # the local compile cache (sccache)
        self.verified = root / "verified"      # verdicts of a verify under newer rules
        self.reports = root / "reports"        # the nightly bot's runs (reports= moves them)
        self.bot_workspaces = root / "bot-workspaces"  # the nightly bot's cell workspaces
        self.source_stat_cache = self.cache / SOURCE_STAT_CACHE
        self.machine_stat_cache = self.cache / MACHINE_STAT_CACHE
        self.probe_cache = self.cache / PROBE_CACHE
        self.memos = self.cache / MEMO_DIR
        self.listings = self.cache / LISTING_DIR
        self.toolchain_quick = self.cache / QUICK_DIR
        self.stage_record_key = self.cache / "stage-records.key"  # the stage records' HMAC key
        self.runtime_installs = self.cache / "runtime"  # <digest>/site-packages: [runtime] pins
