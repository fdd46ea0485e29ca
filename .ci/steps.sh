# Sourced by bootstrap.sh and .ci/pytorch-prereqs.sh: named steps with their own logs, apt
# that waits for the dpkg lock, and the closing "what next".
#
#   step "name" cmd args...   prints `==> name` as it starts, sends the command's output to
#                             $ORCH_STEP_LOGS/<n>-<name>.log, prints `    ok (Ns)` when it
#                             ends; on failure names the step, its exit status and its log,
#                             shows the log's last lines and exits with that status.
#   apt_get args...           apt-get (through sudo when not root) that waits up to
#                             $ORCH_APT_LOCK_TIMEOUT seconds (default 600) for the dpkg lock
#                             another apt/dpkg holds (unattended-upgrades on a fresh machine)
#                             instead of failing on `Could not get lock`.
#   next_steps                prints the commands that follow a successful set-up.

ORCH_STEP_LOGS=${ORCH_STEP_LOGS:-${TMPDIR:-/tmp}/orch-bootstrap-$(id -u)}
ORCH_STEP_N=${ORCH_STEP_N:-0}

apt_get() {
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get \
        -o DPkg::Lock::Timeout="${ORCH_APT_LOCK_TIMEOUT:-600}" "$@"
}

step() {
    local name=$1; shift
    ORCH_STEP_N=$((ORCH_STEP_N + 1))
    export ORCH_STEP_N
    mkdir -p "$ORCH_STEP_LOGS"
    local log="$ORCH_STEP_LOGS/$(printf '%02d' "$ORCH_STEP_N")-${name//[^A-Za-z0-9._-]/-}.log"
    local start=$SECONDS rc=0
    echo "==> $name"
    "$@" >"$log" 2>&1 || rc=$?
    if [ "$rc" != 0 ]; then
        echo "error: step '$name' failed (exit $rc); its log: $log" >&2
        tail -n 15 "$log" | sed 's/^/    | /' >&2
        exit "$rc"
    fi
    echo "    ok ($((SECONDS - start))s)"
}

next_steps() {
    cat <<'NEXT'
Set up. Next, in each new shell:
  . .venv/bin/activate          # doit and the tools on PATH
  . .orch/env.sh                # the active artifact on PATH/LD_LIBRARY_PATH/PYTHONPATH
then: doit help (every verb), doit status, doit switch variant=release, doit rollback
NEXT
}
