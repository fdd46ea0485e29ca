"""Pinned archive sources: a tarball checked by sha256, plus overlays (pinned tarballs
placed at a path inside the tree, e.g. an emptied submodule) and patches applied in order.

The identity is computed from those inputs alone, so the unpacked tree (under
`<store>/sources/`, made once, beside its final place, then renamed) is never re-hashed.
`source=PATH` builds a developer checkout instead (see checkout.py); with
`patch_checkouts = true` the recipe's overlays and patches go onto a copy of it.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from orchestrator.config.settings import Settings
from orchestrator.console import console
from orchestrator.fs import remove_tree
from orchestrator.hashing import digest_of
from orchestrator.lock.files import load_lock
from orchestrator.model.recipe import Recipe
from orchestrator.model.source_archive import ArchiveSource
from orchestrator.sources.archives import obtain_archive, untar
from orchestrator.sources.checkout import checkout_dir, checkout_ignore, prepare_checkout
from orchestrator.sources.patches import apply_overlays, apply_patch, patch_identity, patch_paths, patched_copy
from orchestrator.sources.prepared import TREE_STAMP, PreparedSource, stat_cache
from orchestrator.sources.skbuild_settings import static_check, version_in
from orchestrator.sources.tree_version import detect_driver, read_pyproject, tree_version
from orchestrator.store.artifacts import Store


def archive_identity(spec: ArchiveSource, patches: list[Path]) -> dict[str, Any]:
    """Everything that decides the tree's content; patch order matters."""
    return {
        "kind": "archive",
        "sha256": spec.sha256,
        "strip_components": spec.strip_components,
        "overlays": [{"path": o.path, "sha256": o.sha256, "strip_components": o.strip_components,
                      **({"archive_dir": o.archive_dir} if o.archive_dir else {})}
                     for o in spec.overlays],
        "patches": patch_identity(patches),
    }


def unpacked_tree(identity: dict[str, Any], recipe: str, store: Store) -> Path:
    """Where the pinned archive of this identity is (or will be) unpacked; named only."""
    return store.paths.sources / f"{digest_of(identity)[:16]}-{recipe}"


def archive_prepared(settings: Settings, recipe: Recipe, store: Store) -> bool:
    """The recipe's pinned archive is unpacked, patched and stamped (no `source=` checkout)."""
    spec = recipe.source
    if not isinstance(spec, ArchiveSource) or settings.vars.get("source"):
        return False
    identity = archive_identity(spec, patch_paths(spec, settings.recipes_dir, recipe.name))
    return (unpacked_tree(identity, recipe.name, store) / TREE_STAMP).is_file()


def materialize(spec: ArchiveSource, patches: list[Path], identity: dict[str, Any],
                recipe: str, store: Store) -> Path:
    """Unpack archive + overlays + patches once into <store>/sources/<key>-<recipe>/."""
    key = digest_of(identity)[:16]
    final = unpacked_tree(identity, recipe, store)
    if (final / TREE_STAMP).is_file():
        return final
    cache = stat_cache(store)
    main = obtain_archive(spec, store, cache)
    overlays = [(o, obtain_archive(o, store, cache)) for o in spec.overlays]
    cache.save()
    with store.lock(f"source-{key}"):
        if (final / TREE_STAMP).is_file():
            return final
        with console.status(f"unpacking {spec.file}"), store.staging(f"source-{key}") as tmp:
            tree = tmp / "tree"
            untar(main, tree, spec.strip_components)
            apply_overlays(tree, overlays, spec.file)
            for p in patches:
                apply_patch(tree, p)
            (tree / TREE_STAMP).write_text(digest_of(identity) + "\n")
            final.parent.mkdir(parents=True, exist_ok=True)
            if final.exists():  # a half-made tree cannot exist (rename); an old stampless one can
                remove_tree(final)
            os.rename(tree, final)
    return final


def prepare_archive_source(settings: Settings, recipe: Recipe, spec: ArchiveSource,
                           store: Store) -> PreparedSource:
    """source=PATH builds that checkout; otherwise the recipe's pinned archive."""
    raw = settings.vars.get("source")
    if raw:
        if recipe.build.system == "pytorch":  # an unsupported tree: one line, before any work
            tree = checkout_dir(raw)
            tree_version(tree, f"source={raw}")
            if detect_driver(tree) == "scikit-build-core":  # before the checkout is copied
                static_check(tree, read_pyproject(tree),
                             version_in(load_lock(settings.locks_dir, recipe.lock)))
        prepared = prepare_checkout(raw, store)
        if spec.patch_checkouts and (spec.overlays or spec.patches):
            return patched_checkout(settings, recipe, spec, prepared, store)
        return prepared
    patches = patch_paths(spec, settings.recipes_dir, recipe.name)
    identity = archive_identity(spec, patches)
    tree = materialize(spec, patches, identity, recipe.name, store)
    return PreparedSource(dir=tree, identity=identity, extra={"checkout": False})


def patched_checkout(settings: Settings, recipe: Recipe, spec: ArchiveSource,
                     prepared: PreparedSource, store: Store) -> PreparedSource:
    """`patch_checkouts = true`: the recipe's overlays (only where the checkout's directory is
    empty or missing: a checkout with its submodules keeps them) and patches, applied to a
    copy under the store; the checkout itself is never written. Identity = the checkout's +
    the overlays used + the patches (in order)."""
    src = prepared.dir
    patches = patch_paths(spec, settings.recipes_dir, recipe.name)
    wanted = [o for o in spec.overlays
              if not ((src / o.path).is_dir() and any((src / o.path).iterdir()))]
    identity = {**prepared.identity,
                "overlays": archive_identity(spec.model_copy(update={"overlays": wanted}),
                                             [])["overlays"],
                "patches": patch_identity(patches)}
    cache = stat_cache(store)
    overlays = [(o, obtain_archive(o, store, cache)) for o in wanted]
    cache.save()
    tree = patched_copy(src, patches, identity, recipe.name, store, ignore=checkout_ignore(src),
                        overlays=overlays,
                        what=f"the checkout {src}", keep_mtimes=True)
    # One incremental build tree per checkout and recipe-side inputs: the copy keeps mtimes,
    # so an overlay bumped to files with older mtimes must not reuse objects built before.
    build_key = f"{src}\0{digest_of([identity['overlays'], identity['patches']])}"
    return PreparedSource(dir=tree, identity=identity,
                          extra={**prepared.extra, "patched_copy": True, "checkout_dir": str(src),
                                 "build_key": build_key})
