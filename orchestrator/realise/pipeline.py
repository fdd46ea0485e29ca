"""Realise a plan: already in the store, substitute from a cache, or build → verify → commit."""
from __future__ import annotations

import importlib
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.builders.compile_cache import launcher
from orchestrator.cache.toolchain_hook import toolchain_substituter  # light: see its docstring
from orchestrator.config.settings import Settings
from orchestrator.console import console, phase, print_phase
from orchestrator.errors import CheckFailed
from orchestrator.fs import remove_tree, write_atomic
from orchestrator.hashing import pretty_json
from orchestrator.memo import head_start
from orchestrator.memo.file_reads import untraced
from orchestrator.memo.plan_memo import planning
from orchestrator.model.manifest import Manifest
from orchestrator.plan.derivation import Plan, make_plan
from orchestrator.realise import build_usage
from orchestrator.realise.reverify import reverify_if_rules_changed, rules_digest
from orchestrator.store.artifacts import Store
from orchestrator.toolchain.materialize import Toolchain, ensure_toolchain, linked_toolchain, toolchain_root

if TYPE_CHECKING:
    from orchestrator.builders.process import BuildFailed

# The builders, build_step and rebuild_check are imported where a build runs: a present
# artifact (the no-op build, switch) never pays for them.


@dataclass
class Realised:
    path: Path
    plan: Plan
    origin: str  # "present" | "built" | "substituted from <url>"
    store: Store = field(repr=False)
    comparison: dict | None = None  # rebuild=1 / check=1: the rebuilt output against the store
    _toolchain: Toolchain | None = field(default=None, repr=False)

    @property
    def toolchain(self) -> Toolchain:
        """The toolchain of the plan's lock: the one realise ensured for a built or substituted
        artifact; a present artifact's is ensured on first use (an up-to-date build does not
        touch the toolchain), then kept."""
        if self._toolchain is None:
            self._toolchain = ensure_toolchain(self.store, self.plan.lock)
        return self._toolchain

    def build_tree(self) -> Path:
        """The build tree this plan builds in (its head start's, head_start.py), whether or
        not this command built: named, nothing checked or made."""
        from orchestrator.builders.context import build_tree_of

        tc = self._toolchain or Toolchain(toolchain_root(self.store, self.plan.lock),
                                          self.plan.lock)
        return build_tree_of(self.store, self.plan, tc)

    def toolchain_to_link(self) -> Toolchain:
        """What a switch links (.orch/toolchain, env.sh) and runs nothing from: the toolchain
        realise ensured, else `linked_toolchain` (materialized, its files not lstat()ed)."""
        return self._toolchain if self._toolchain is not None else \
            linked_toolchain(self.store, self.plan.lock)


def keep_failed_build(store: Store, plan: Plan, stage: Path, build_dir: Path,
                      err: BuildFailed) -> BuildFailed:
    """A failed build's staged output (its meta/build.log) moves to tmp/failed-<name>/, which
    outlives the command (`doit gc` removes it); the message names paths that exist."""
    keep = failed_dir(store, plan)
    remove_tree(keep)
    os.rename(stage, keep)
    msg = str(err).replace(str(stage), str(keep))
    return type(err)(f"{msg}; the build tree is kept in {build_dir}", report=err.report)


def failed_dir(store: Store, plan: Plan) -> Path:
    return store.tmp_dir / f"failed-{plan.name}"


def run_verify(stage: Path, plan: Plan, toolchain: Toolchain,
               settings: Settings, kept_in: Path) -> tuple[dict, bool]:
    """Verify the staged artifact: (the manifest's summary, whether it may be committed).

    A failure may be committed only with commit_failed=1, which the summary then records;
    the summary also records the digest of the rules it was verified under (see reverify)."""
    from orchestrator.verify import verify_artifact

    report = verify_artifact(stage, plan, toolchain)
    report.forced = settings.commit_failed and not report.ok
    # Not fsynced: like every staged file it becomes durable with the commit's manifest.json
    # (an fsync here cost 0.1-0.5 s of an incremental build on a busy disk).
    write_atomic(stage / "meta" / "verify.json", pretty_json(report.to_json()), durable=False)
    if not report.ok:
        where = ("meta/verify.json of the store entry" if report.forced
                 else str(kept_in / "meta" / "verify.json"))
        console.print(report.render(full_report=where), markup=False)
    summary = {**report.summary(), "rules": rules_digest(plan)}
    return summary, report.ok or settings.commit_failed


def build(settings: Settings, store: Store, plan: Plan, toolchain: Toolchain) -> Path:
    from orchestrator.builders.context import build_tree_of
    from orchestrator.builders.process import BuildFailed
    from orchestrator.realise.build_step import run_builder

    build_dir = build_tree_of(store, plan, toolchain)
    if head_start.running_in(build_dir):  # what run_verify imports, while that ninja runs
        importlib.import_module("orchestrator.verify")
    with head_start.reentrant_lock(store.lock(f"build-{build_dir.name}")):
        if (found := store.find(plan.artifact_id)) is not None:
            return found
        with store.staging(plan.name) as stage:
            t0 = time.monotonic()
            try:
                with build_usage.measured(build_dir) as usage:
                    ctx = run_builder(settings, store, plan, toolchain, build_dir, stage,
                                      settings.compile_cache)
            except BuildFailed as e:
                raise keep_failed_build(store, plan, stage, build_dir, e) from None
            t1 = time.monotonic()
            with phase("verify") as outcome:
                verify, committable = run_verify(stage, plan, toolchain, settings,
                                                 failed_dir(store, plan))
                outcome.failed = not verify["ok"]
            t2 = time.monotonic()
            if not committable:
                keep = failed_dir(store, plan)
                remove_tree(keep)
                os.rename(stage, keep)
                raise CheckFailed(f"verify failed for {plan.name}: not committed; the staged "
                                  f"output is kept in {keep} (commit_failed=1 commits anyway)")
            return commit_built(store, plan, stage, ctx.prefix_map(),
                                {"build_s": round(t1 - t0, 3), "verify_s": round(t2 - t1, 3),
                                 **usage.timings()}, verify)


def commit_built(store: Store, plan: Plan, stage: Path, prefix_map: dict[str, str],
                 timings: dict[str, float], verify: dict) -> Path:
    """Commit a built and verified stage as the plan's artifact (its manifest says so)."""
    manifest = Manifest(
        id=plan.artifact_id, recipe=plan.recipe.name, variant=plan.variant_name,
        derivation=plan.derivation, files=Manifest.scan_files(stage),
        prefix_map={**prefix_map, **plan.source.extra.get("prefix_map", {})},
        timings=timings, verify=verify, origin={"kind": "built", "host": socket.gethostname()})
    c0 = time.monotonic()
    path = store.commit(stage, manifest)
    remove_tree(failed_dir(store, plan))
    st = store.last_commit
    print_phase("commit", time.monotonic() - c0,
                f"{st.files} files, {st.bytes_new / 1e6:.1f} MB new, "
                f"{st.bytes_linked / 1e6:.1f} MB hard-linked")
    return path


def planned(settings: Settings, store: Store, recipe: str | None = None,
            variant: str | None = None) -> Plan:
    """The plan, after the store's housekeeping; what it reads keys the plan memo."""
    with planning(settings.store_root):  # plan_memo.py
        launcher.launcher_settings(settings)  # a bad compile cache / distcc setting: exit 2 first
        with untraced():  # the store's housekeeping: no input of the plan
            store.ensure()
            store.clean_stale()
        return make_plan(settings, store, recipe, variant)


def realise(settings: Settings, store: Store, recipe: str | None = None,
            variant: str | None = None) -> Realised:
    plan = planned(settings, store, recipe, variant)
    if (found := store.find(plan.artifact_id)) is not None:
        reverify_if_rules_changed(settings, store, plan, found)
        return rebuild_or_check_if_asked(settings, store, Realised(found, plan, "present", store))
    toolchain = ensure_toolchain(store, plan.lock, toolchain_substituter(settings))
    if settings.substitute:
        from orchestrator.cache.pull import substitute  # here: the cache's imports cost every start

        pulled = substitute(settings, plan, store)
        if pulled is not None:
            origin = Store.read_manifest(pulled).origin.get("url", "a substituter")
            reverify_if_rules_changed(settings, store, plan, pulled)
            return rebuild_or_check_if_asked(settings, store, Realised(pulled, plan, f"substituted from {origin}",
                                                   store, _toolchain=toolchain))
    path = build(settings, store, plan, toolchain)
    return rebuild_or_check_if_asked(settings, store, Realised(path, plan, "built", store, _toolchain=toolchain))


def rebuild_or_check_if_asked(settings: Settings, store: Store, r: Realised) -> Realised:
    """rebuild=1 / check=1: build the realised artifact once more and compare (the store
    entry is never touched); check=1 raises CheckFailed when anything differs."""
    if not (settings.check or (settings.rebuild and r.origin != "built")):
        return r  # rebuild=1 of an artifact just built: that was the build
    from orchestrator.realise.rebuild_check import rebuild_and_compare

    r.comparison = rebuild_and_compare(settings, store, r.plan, r.path, r.toolchain)
    return r
