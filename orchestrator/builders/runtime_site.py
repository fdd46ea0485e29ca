"""A build's locked runtime requirements (`[runtime] requires`, pinned in
locks/runtime/<recipe>.lock.json) installed into the staged entry's `runtime/site-packages`
(model.recipe.RUNTIME_SITE), which `.orch/env.sh`, `doit run`/`bench` and the IDE files put
on PYTHONPATH after the prefix's own: after a switch, `import` finds them with nothing done
by hand. Beside the prefix, not in it: verify's checks are for the project's own files.

The toolchain's pip installs the pinned wheels by hash (--require-hashes --no-deps
--only-binary), once per pin set, into `<store>/cache/runtime/<digest>` (temp, then rename);
each build copies that tree. What pip installed is checked against the pins (name and
version of every *.dist-info): anything else is refused.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from email.parser import HeaderParser
from pathlib import Path

from orchestrator.errors import UserError, is_no_space, no_space
from orchestrator.fs import remove_tree, temp_in
from orchestrator.hashing import digest_of
from orchestrator.model.recipe import RUNTIME_SITE
from orchestrator.model.runtime_lock import RuntimeLock
from orchestrator.store.artifacts import Store
from orchestrator.toolchain.materialize import Toolchain


def installed(site: Path) -> dict[str, str]:
    """Distribution name (normalized) -> version, from the *.dist-info METADATA under site."""
    from packaging.utils import canonicalize_name

    found = {}
    for meta in sorted(site.glob("*.dist-info/METADATA")):
        head = HeaderParser().parsestr(meta.read_text(errors="replace"))
        found[canonicalize_name(head.get("Name", meta.parent.name))] = head.get("Version", "?")
    return found


def check_installed(site: Path, rl: RuntimeLock) -> None:
    """UserError naming the first distribution that differs from the pins."""
    from packaging.utils import canonicalize_name

    want = {canonicalize_name(e.name): e.version for e in rl.entries.values()}
    got = installed(site)
    for name in sorted(want.keys() | got.keys()):
        if want.get(name) != got.get(name):
            raise UserError(f"runtime requirements of {rl.recipe}: {site} holds {name} "
                            f"{got.get(name, '(missing)')}, the runtime lock pins "
                            f"{want.get(name, '(nothing)')}; run `doit lock`")


def _pip_install(toolchain: Toolchain, rl: RuntimeLock, target: Path) -> None:
    req = target.parent / "requirements.txt"
    req.write_text("".join(f"{e.name}=={e.version} --hash=sha256:{e.sha256}\n"
                           for e in sorted(rl.entries.values(), key=lambda e: e.name)))
    res = subprocess.run([str(toolchain.python), "-m", "pip", "install", "--quiet",
                          "--no-deps", "--require-hashes", "--only-binary=:all:", "--no-compile",
                          "--disable-pip-version-check", "--target", str(target), "-r", str(req)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        if is_no_space(res.stderr):
            raise no_space(target)
        lines = [ln for ln in res.stderr.splitlines() if ln.strip() and "WARNING" not in ln]
        detail = " ".join(lines[-3:]) if lines else "pip failed"
        raise UserError(f"installing the runtime requirements of recipes/{rl.recipe}.toml "
                        f"failed: {detail}")


def cache_key(toolchain: Toolchain, rl: RuntimeLock) -> str:
    """The name of the pins' cached install under <store>/cache/runtime/."""
    return digest_of({"python": toolchain.python_entry.digest(), "entries": rl.digests()})[:32]


def cache_lock_name(key: str) -> str:
    """The store lock held while a cached install is made or copied (gc skips it then)."""
    return f"runtime-{key}"


def cached_site(store: Store, toolchain: Toolchain, rl: RuntimeLock) -> Path:
    """The installed pins (a site-packages directory) in the store's cache, made once (temp,
    then rename); the caller holds cache_lock_name(cache_key(...))."""
    final = store.paths.runtime_installs / cache_key(toolchain, rl)
    site = final / "site-packages"
    if site.is_dir():
        return site
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_in(final.parent, final.name)
    tmp.mkdir()
    try:
        _pip_install(toolchain, rl, tmp / "site-packages")
        check_installed(tmp / "site-packages", rl)
        os.rename(tmp, final)
    except BaseException:
        remove_tree(tmp)
        raise
    return site


def install_runtime(store: Store, toolchain: Toolchain, rl: RuntimeLock | None, stage: Path) -> None:
    """stage/RUNTIME_SITE from the pins (nothing without [runtime] or with no pins left)."""
    if rl is None or not rl.entries:
        return
    dest = stage / RUNTIME_SITE
    dest.parent.mkdir(parents=True, exist_ok=True)
    # Made or copied whole under its lock: gc never removes it meanwhile (store_usage.apply).
    with store.lock(cache_lock_name(cache_key(toolchain, rl))):
        shutil.copytree(cached_site(store, toolchain, rl), dest, symlinks=True)
    check_installed(dest, rl)
