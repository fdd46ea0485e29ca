#!/bin/sh
# c10_bench.cpp built against the artifact $ORCH_PROFILE names (its prefix/include) and linked
# to its libc10.so with a RUNPATH to its prefix/lib, once per artifact (cached by the store
# entry's name: an entry never changes), then run. The driver's own flags are the same for
# every artifact (-O2), so what differs between two artifacts is their libc10.so.
#   doit bench recipe=pytorch2 targets=c10 variants=relwithdebinfo,release metric=ns_per_op \
#       -- sh docs/examples/c10_bench.sh tensorimpl 200000
# C10_BENCH_CACHE: where the built drivers go (default ~/.cache/orchestrator/c10-bench).
set -eu
: "${ORCH_PROFILE:?run me through doit bench or doit run (ORCH_PROFILE names the artifact)}"
here=$(cd "$(dirname "$0")" && pwd)
prefix="$ORCH_PROFILE/prefix"
exe="${C10_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/orchestrator/c10-bench}/$(basename "$ORCH_PROFILE")/c10_bench"
if [ ! -x "$exe" ] || [ "$here/c10_bench.cpp" -nt "$exe" ]; then
    mkdir -p "$(dirname "$exe")"
    ${CXX:-c++} -std=c++17 -O2 -DNDEBUG -I"$prefix/include" "$here/c10_bench.cpp" \
        -L"$prefix/lib" -lc10 -Wl,-rpath,"$prefix/lib" -Wl,--enable-new-dtags -o "$exe.tmp.$$"
    mv -f "$exe.tmp.$$" "$exe"  # beside the target, then renamed: never half-written
fi
exec "$exe" "$@"
