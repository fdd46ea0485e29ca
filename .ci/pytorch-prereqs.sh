#!/usr/bin/env bash
# Prerequisites of the PyTorch recipe (recipes/pytorch.toml) and its tests:
#   1. a deb-src entry, generated from this machine's own apt sources (no host is written here),
#   2. `apt-get build-dep pytorch` (the system libraries locks/pytorch.toml pins),
#   3. every source tarball any recipe pins (orchestrator.sources.prefetch), sha256-checked.
# Usage (root, or sudo available): .ci/pytorch-prereqs.sh [ARCHIVE_DIR]
#   ARCHIVE_DIR defaults to $ORCH_ARCHIVES, else ~/.cache/orchestrator/archives (where the
#   orchestrator looks by default). Idempotent; ~1 min on a fresh machine.
set -euo pipefail

dest=${1:-${ORCH_ARCHIVES:-$HOME/.cache/orchestrator/archives}}
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
. "$(dirname "$0")/steps.sh"  # step (named, logged), apt_get (waits for the dpkg lock)
echo "==> pytorch prerequisites: deb-src entry, build-deps, source tarballs"

# --- 1. deb-src entries mirroring every enabled `deb` entry --------------------------------
gen=$(python3 - <<'PY'
import glob, re
out822, outline = [], []
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    if "orch-deb-src" in path:
        continue
    for stanza in re.split(r"\n\s*\n", open(path).read().strip()):
        fields = {}
        for line in stanza.splitlines():
            if line.strip() and not line.lstrip().startswith("#") and ":" in line and not line[0].isspace():
                k, v = line.split(":", 1)
                fields[k.strip()] = v.strip()
        if "deb" in fields.get("Types", "").split() and fields.get("Enabled", "yes") != "no":
            fields["Types"] = "deb-src"
            out822.append("\n".join(f"{k}: {v}" for k, v in fields.items()))
            if "bookworm" in fields.get("Suites", "").split():
                # the recipes' newer source packages (kineto/pocketfft snapshots, PyTorch 2.x)
                newer = dict(fields, Suites="trixie")
                out822.append("\n".join(f"{k}: {v}" for k, v in newer.items()))
for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        if line.startswith("deb ") and "orch-deb-src" not in path:
            outline.append("deb-src " + line[4:])
            if " bookworm " in line:
                outline.append("deb-src " + line[4:].replace(" bookworm ", " trixie "))
if out822:
    print("sources"); print("\n\n".join(out822))
elif outline:
    print("list"); print("\n".join(outline))
PY
)
kind=$(head -n1 <<<"$gen")
if [ -z "$kind" ]; then
    echo "pytorch-prereqs: no apt 'deb' source found in /etc/apt; cannot derive deb-src" >&2
    exit 2
fi
tail -n +2 <<<"$gen" | $sudo tee "/etc/apt/sources.list.d/orch-deb-src.$kind" >/dev/null
step "apt-get update (with deb-src)" apt_get update -q

# --- 2. build dependencies ----------------------------------------------------------------
step "apt-get build-dep pytorch" apt_get build-dep -y -q pytorch=1.13.1+dfsg-4

echo "==> pytorch source tarballs into $dest"

# --- 3. every source tarball any recipe pins, sha256-checked, into the archive cache --------
# (recipes/*.toml [source] and [[source.overlays]] with a fetch rule: nothing is downloaded at
# build or test time). One that cannot be had is one line naming recipe, file and cause.
here=$(cd "$(dirname "$0")/.." && pwd)
py="$here/.venv/bin/python"
if [ ! -x "$py" ]; then
    echo "pytorch-prereqs: $py is missing; run ./bootstrap.sh (it makes .venv, then runs this)" >&2
    exit 2
fi
"$py" -m orchestrator.sources.prefetch "$here/recipes" "$dest"
echo "pytorch-prereqs: ok; archives in $dest"
