"""The sccache launcher (CMAKE_<LANG>_COMPILER_LAUNCHER with compile_cache=sccache): the same
key for a compile whatever path the checkout and the build tree are at.

sccache hashes the compile line's arguments as written, and ours name this machine's paths in
`-ffile-prefix-map=<checkout or build tree>=<logical root>` (sccache 0.16 has no ignore list;
its basedirs rewrite only the preprocessed text). So the launcher hands sccache the line with
each such absolute old prefix replaced by a token (`/orch/sccache-map/0`, the logical root
kept, so different logical names still differ), the real prefixes in the environment
(ORCH_SCCACHE_MAP_<n>, which sccache passes to the compiler and does not hash), and a
stand-in compiler (`<sccache dir>/shims/<compiler>-<key>`, whose text names the real
compiler and its sha256, so a changed compiler changes the key) that puts the prefixes back
before it runs the compiler, for the preprocessing sccache hashes and for the compile. The
paths themselves still reach the key through the preprocessed text, where SCCACHE_BASEDIRS
(store root, build tree, checkout) strips them.

Standard library only: run as `python -I sccache_compile.py <sccache> <shim dir> <compiler>
<args...>` by the launcher script `sccache.launcher_script` writes, and as `python -I
sccache_compile.py --shim <compiler> <args...>` by a stand-in.
"""
from __future__ import annotations

import hashlib
import os
import re
import shlex
import sys
import tempfile

GCC_NAME = re.compile(r"^(?:[\w.+-]+-)?(?:gcc|g\+\+|cc|c\+\+)(?:-\d+(?:\.\d+)*)?$")
PREFIX_MAP = re.compile(r"^(-f(?:file|debug|macro|profile)-prefix-map=)(/[^=]*)(=.*)$")
TOKEN = "/orch/sccache-map/"
ENV = "ORCH_SCCACHE_MAP_"
SHIM_MODE = "--shim"


def hide_paths(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """The arguments with each prefix map's absolute old prefix replaced by a token, and the
    environment that gives the tokens back."""
    out, env = [], {}
    for a in args:
        m = PREFIX_MAP.match(a)
        if m is None:
            out.append(a)
            continue
        n = len(env)
        env[f"{ENV}{n}"] = m[2]
        out.append(f"{m[1]}{TOKEN}{n}{m[3]}")
    return out, env


def restore_paths(args: list[str], env: dict[str, str]) -> list[str]:
    """The stand-in's side: every token back to its prefix (a token without one: exit 2)."""
    out = []
    for a in args:
        m = PREFIX_MAP.match(a)
        if m is not None and m[2].startswith(TOKEN):
            name = ENV + m[2][len(TOKEN):]
            if name not in env:
                sys.stderr.write(f"sccache stand-in: {a}: {name} is not set\n")
                raise SystemExit(2)
            a = f"{m[1]}{env[name]}{m[3]}"
        out.append(a)
    return out


def file_digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def shim_for(shim_dir: str, compiler: str) -> str:
    """The stand-in for `compiler` (written once per compiler binary; atomic)."""
    real = os.path.realpath(compiler)
    st = os.stat(real)
    # fs.FileSig's fields, spelled out: this script runs with the standard library only
    key = hashlib.sha256("\0".join(map(str, (real, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)))
                         .encode()).hexdigest()[:16]
    shim = os.path.join(shim_dir, f"{os.path.basename(compiler)}-{key}")
    if os.path.isfile(shim):
        return shim
    os.makedirs(shim_dir, exist_ok=True)
    text = (f"#!/bin/sh\n# sccache stand-in for {compiler} ({real}, sha256 {file_digest(real)}):\n"
            f"# puts back the prefix-map paths the launcher took out of the hashed line\n"
            f"exec {shlex.quote(sys.executable)} -I {shlex.quote(os.path.abspath(__file__))} "
            f"{SHIM_MODE} {shlex.quote(compiler)} \"$@\"\n")
    fd, tmp = tempfile.mkstemp(dir=shim_dir, prefix=".shim-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o755)
    os.replace(tmp, shim)
    return shim


def main(argv: list[str]) -> int:
    if argv[0] == SHIM_MODE:
        compiler, *args = argv[1:]
        os.execv(compiler, [compiler, *restore_paths(args, dict(os.environ))])
    sccache, shim_dir, compiler, *args = argv
    hidden, env = hide_paths(args)
    if not env or not GCC_NAME.match(os.path.basename(compiler)):
        os.execv(sccache, [sccache, compiler, *args])  # nothing to hide, or not GCC (nvcc)
    os.execve(sccache, [sccache, shim_for(shim_dir, compiler), *hidden], {**os.environ, **env})
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
