"""Every archive the recipes pin, fetched once into an archive cache: the set-up's step
(.ci/pytorch-prereqs.sh), so that builds and tests never download at run time.

`python -m orchestrator.sources.prefetch RECIPES_DIR DEST`: one line per archive fetched; an
archive that cannot be had (a version the registry no longer serves, a changed sha256) is
one line naming the recipe, the file and the cause, and exit 2 after trying the others.
"""
from __future__ import annotations

import sys
from pathlib import Path

from orchestrator.errors import UserError
from orchestrator.fs import remove_tree, temp_in
from orchestrator.model.recipe import load_recipe
from orchestrator.model.source_archive import Archive, ArchiveSource
from orchestrator.sources.archives import check_pinned_digest, fetch_into
from orchestrator.store.artifacts import Store


def pinned_archives(recipes_dir: Path) -> list[tuple[str, Archive]]:
    """(recipe, archive) for every main tarball and overlay of every recipe that has a fetch
    rule, once per (file, sha256), in recipe-name order."""
    seen: set[tuple[str, str]] = set()
    out: list[tuple[str, Archive]] = []
    for path in sorted(recipes_dir.glob("*.toml")):
        recipe = load_recipe(recipes_dir, path.stem)
        if not isinstance(recipe.source, ArchiveSource):
            continue
        for archive in (recipe.source, *recipe.source.overlays):
            key = (archive.file, archive.sha256)
            if key in seen or not (archive.fetch.apt_source or archive.fetch.url):
                continue
            seen.add(key)
            out.append((recipe.name, archive))
    return out


def prefetch(recipes_dir: Path, dest: Path) -> list[str]:
    """Fetch what is missing from dest; returns one problem line per archive not had."""
    dest.mkdir(parents=True, exist_ok=True)
    scratch = temp_in(dest, "prefetch")
    store = Store(scratch)
    problems: list[str] = []
    try:
        for recipe, archive in pinned_archives(recipes_dir):
            have = dest / archive.file
            try:
                if have.is_file():
                    check_pinned_digest(have, archive, None)
                    continue
                fetch_into(archive, dest, store)
                print(f"fetched {archive.file} (recipes/{recipe}.toml)", flush=True)
            except UserError as e:
                problems.append(f"recipes/{recipe}.toml: {archive.file}: {e}")
    finally:
        remove_tree(scratch)
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m orchestrator.sources.prefetch RECIPES_DIR DEST", file=sys.stderr)
        return 2
    try:
        problems = prefetch(Path(argv[0]), Path(argv[1]).expanduser())
    except UserError as e:
        problems = [str(e)]
    for line in problems:
        print(f"prefetch: {line}", file=sys.stderr)
    return 2 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
