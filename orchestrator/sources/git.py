"""Git sources: `doit lock` pins url + rev to a commit and its tree; builds use that tree.

`locks/git-sources.json` (machine-written, sorted keys, committed) holds, per recipe with
`source.kind = "git"`: the url and rev it was resolved from, the commit and the commit's tree.
A branch or tag moves only when `doit lock` runs again. The source's identity is the tree
(plus whether submodules are included, and patches): the same tree from another URL or a
mirror is the same source. Objects are fetched once into a bare cache per URL under
`<store>/git/`; the tree is checked out once into `<store>/sources/git-<tree>[-sub]/`, shared by
every recipe that names it (with patches: a patched copy keyed by the whole identity).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from orchestrator.config.settings import Settings
from orchestrator.console import console
from orchestrator.errors import UserError
from orchestrator.fs import remove_tree, temp_in, write_atomic
from orchestrator.hashing import digest_of, pretty_json
from orchestrator.model.recipe import Recipe, load_recipe
from orchestrator.model.source_git import GitSource
from orchestrator.sources.checkout import prepare_checkout
from orchestrator.sources.patches import patch_identity, patch_paths, patched_copy
from orchestrator.sources.prepared import TREE_STAMP, PreparedSource
from orchestrator.store.artifacts import Store

GIT_LOCK = "git-sources.json"
HEX40 = re.compile(r"^[0-9a-f]{40}$")
# Local bare repositories (file://) are allowed as submodule sources too: tests, mirrors.
# Never a transport that runs a command (ext::), whatever a URL or a .gitmodules says. Every
# user-supplied argument comes after `--` or `--end-of-options`: never an option to git.
GIT = ["git", "-c", "protocol.file.allow=always", "-c", "protocol.ext.allow=never",
       "-c", "advice.detachedHead=false", "-c", "init.defaultBranch=main"]


def _git(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run([*GIT, *map(str, args)], cwd=cwd, capture_output=True, text=True, env=env)


def _must(res: subprocess.CompletedProcess, what: str) -> str:
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"{what} failed: {last}")
    return res.stdout.strip()


def cache_repo(store: Store, url: str) -> Path:
    """The bare repository that caches one URL's objects (made on first use)."""
    repo = store.paths.git / f"{digest_of(url)[:16]}.git"
    if not (repo / "HEAD").is_file():
        repo.parent.mkdir(parents=True, exist_ok=True)
        tmp = temp_in(repo.parent, repo.name)
        remove_tree(tmp)
        _must(_git("init", "--quiet", "--bare", tmp), f"git init {tmp}")
        os.rename(tmp, repo)
    return repo


def fetch_all(repo: Path, url: str, where: str) -> None:
    res = _git("--git-dir", repo, "fetch", "--quiet", "--prune", "--tags", "--", url,
               "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"{where}: source.url {url!r} cannot be fetched ({last}); fix source.url")


def resolve_rev(repo: Path, rev: str) -> str | None:
    res = _git("--git-dir", repo, "rev-parse", "--verify", "--quiet", "--end-of-options",
               f"{rev}^{{commit}}")
    return res.stdout.strip() if res.returncode == 0 else None


def lock_entry(store: Store, recipe: str, spec: GitSource) -> dict[str, Any]:
    """Resolve url + rev to {url, rev, commit, tree} (fetching into the store's cache)."""
    where = f"recipes/{recipe}.toml"
    with store.lock(f"git-{digest_of(spec.url)[:16]}"):
        repo = cache_repo(store, spec.url)
        fetch_all(repo, spec.url, where)
        commit = resolve_rev(repo, spec.rev)
        if commit is None and HEX40.match(spec.rev):  # an unadvertised commit: ask for it
            _git("--git-dir", repo, "fetch", "--quiet", "--", spec.url, spec.rev)
            commit = resolve_rev(repo, spec.rev)
    if commit is None:
        raise UserError(f"{where}: source.rev {spec.rev!r} is not a branch, tag or commit of "
                        f"{spec.url}; fix source.rev")
    tree = _must(_git("--git-dir", repo, "rev-parse", "--verify", "--end-of-options",
                      f"{commit}^{{tree}}"), "git rev-parse")
    return {"url": spec.url, "rev": spec.rev, "commit": commit, "tree": tree,
            "submodules": spec.submodules}


def lock_path(settings: Settings) -> Path:
    return settings.locks_dir / GIT_LOCK


def read_git_lock(settings: Settings) -> dict[str, dict[str, Any]]:
    p = lock_path(settings)
    if not p.is_file():
        return {}
    try:
        return dict(json.loads(p.read_text()).get("sources", {}))
    except (ValueError, AttributeError):
        raise UserError(f"{p} is not valid JSON; run `doit lock` to rewrite it") from None


def git_recipes(settings: Settings) -> dict[str, GitSource]:
    """Every recipe's git source, each recipe read and validated: an invalid recipe is
    UserError (exit 2) on every lock path, before anything is resolved or written."""
    out: dict[str, GitSource] = {}
    for path in sorted(settings.recipes_dir.glob("*.toml")):
        recipe = load_recipe(settings.recipes_dir, path.stem)
        if isinstance(recipe.source, GitSource):
            out[recipe.name] = recipe.source
    return out


def lock_git_sources(settings: Settings, store: Store,
                     recipes: dict[str, GitSource] | None = None, check: bool = False) -> str | None:
    """`doit lock`: pin every git recipe's rev; write locks/git-sources.json when it changes
    (check: write nothing). What changed (None: nothing)."""
    found = git_recipes(settings) if recipes is None else recipes
    entries = {name: lock_entry(store, name, spec) for name, spec in found.items()}
    p = lock_path(settings)
    if not entries and not p.is_file():
        return None
    text = pretty_json({"schema": 1, "sources": entries})
    if not p.is_file() or p.read_text() != text:
        if check:
            console.print(f"{p}: would change", markup=False)
            return f"{GIT_LOCK}"
        write_atomic(p, text)
        console.print(f"{p}: written ({len(entries)} git sources)")
    return None


def locked(settings: Settings, recipe: Recipe, spec: GitSource) -> dict[str, Any]:
    if recipe.name in settings.tracked_sources:  # a branch head the nightly bot resolved
        return settings.tracked_sources[recipe.name]
    entry = read_git_lock(settings).get(recipe.name)
    if entry is None or entry.get("url") != spec.url or entry.get("rev") != spec.rev:
        raise UserError(f"recipes/{recipe.name}.toml: source (git {spec.url} {spec.rev}) is not "
                        f"pinned in locks/{GIT_LOCK}; run `doit lock`")
    if not all(isinstance(entry.get(k), str) and HEX40.match(entry[k]) for k in ("commit", "tree")):
        raise UserError(f"locks/{GIT_LOCK}: {recipe.name}: commit and tree must be 40 hex "
                        "digits; run `doit lock` to rewrite it")
    return entry


def checkout(store: Store, spec: GitSource, entry: dict[str, Any], where: str) -> Path:
    """The locked commit's tree (with submodules, recursively, if asked), made once."""
    tree = entry["tree"]
    final = store.paths.sources / f"git-{tree[:16]}{'-sub' if spec.submodules else ''}"
    if (final / TREE_STAMP).is_file():
        return final
    with store.lock(f"source-git-{tree[:16]}"):
        if (final / TREE_STAMP).is_file():
            return final
        repo = cache_repo(store, spec.url)
        if resolve_rev(repo, entry["commit"]) is None:
            fetch_all(repo, spec.url, where)
            if resolve_rev(repo, entry["commit"]) is None:
                _git("--git-dir", repo, "fetch", "--quiet", "--", spec.url, entry["commit"])
        if resolve_rev(repo, entry["commit"]) is None:
            raise UserError(f"{where}: the locked commit {entry['commit'][:12]} is no longer in "
                            f"{spec.url}; run `doit lock` to pin the rev again")
        with console.status(f"checking out {spec.url} {entry['commit'][:12]}"), \
                store.staging(f"source-git-{tree[:16]}") as tmp:
            work = tmp / "tree"
            _must(_git("clone", "--quiet", "--no-checkout", "--shared", "--", repo, work), "git clone")
            _must(_git("checkout", "--quiet", "--detach", entry["commit"], "--", cwd=work),
                  "git checkout")  # (checkout takes no --end-of-options; the commit is hex)
            got = _must(_git("rev-parse", "HEAD^{tree}", cwd=work), "git rev-parse")
            if got != tree:
                raise UserError(f"{where}: {entry['commit'][:12]} has tree {got[:12]}, the lock "
                                f"says {tree[:12]}; run `doit lock`")
            if spec.submodules:
                # Relative submodule URLs resolve against the real remote, not the cache.
                _must(_git("remote", "set-url", "--", "origin", spec.url, cwd=work), "git remote")
                _must(_git("submodule", "update", "--quiet", "--init", "--recursive", cwd=work),
                      f"{where}: source.submodules: git submodule update")
            _strip_git(work)
            (work / TREE_STAMP).write_text(json.dumps({"commit": entry["commit"], "tree": tree}) + "\n")
            final.parent.mkdir(parents=True, exist_ok=True)
            if final.exists():
                remove_tree(final)
            os.rename(work, final)
    return final


def _strip_git(root: Path) -> None:
    """A plain tree: no .git of the checkout or its submodules (the identity is the tree)."""
    for dirpath, dirnames, filenames in os.walk(root):
        if ".git" in dirnames:
            remove_tree(Path(dirpath) / ".git")
            dirnames.remove(".git")
        if ".git" in filenames:
            (Path(dirpath) / ".git").unlink()


def prepare_git_source(settings: Settings, recipe: Recipe, spec: GitSource,
                       store: Store) -> PreparedSource:
    """source=PATH builds that checkout; otherwise the locked commit's tree."""
    raw = settings.vars.get("source")
    if raw:
        return prepare_checkout(raw, store)
    where = f"recipes/{recipe.name}.toml"
    entry = locked(settings, recipe, spec)
    identity: dict[str, Any] = {"kind": "git", "tree": entry["tree"], "submodules": spec.submodules}
    tree = checkout(store, spec, entry, where)
    if spec.patches:
        patches = patch_paths(spec, settings.recipes_dir, recipe.name)
        identity["patches"] = patch_identity(patches)
        tree = patched_copy(tree, patches, identity, recipe.name, store, ignore=())
    return PreparedSource(dir=tree, identity=identity,
                          extra={"checkout": False, "git_rev": entry["commit"]})

