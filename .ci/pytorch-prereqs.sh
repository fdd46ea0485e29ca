#!/usr/bin/env bash
# Prerequisites of the PyTorch recipe (recipes/pytorch.toml) and its tests:
#   1. a deb-src entry, generated from this machine's own apt sources (no host is written here),
#   2. `apt-get build-dep pytorch` (the system libraries locks/pytorch.toml pins),
#   3. the pinned source tarballs, sha256-checked, in the archive cache.
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

# --- 3. source tarballs (apt-get source fails on pytorch's Debian patch tarball: expected) ---
mkdir -p "$dest"
fetch() {  # package=version file sha256
    local spec=$1 file=$2 sum=$3
    if [ -f "$dest/$file" ] && echo "$sum  $dest/$file" | sha256sum -c --status; then
        return 0
    fi
    local tmp
    tmp=$(mktemp -d "$dest/.fetch.XXXXXX")
    (cd "$tmp" && apt-get source --download-only -q "$spec" >/dev/null 2>&1) || true
    if [ ! -f "$tmp/$file" ] || ! echo "$sum  $tmp/$file" | sha256sum -c --status; then
        rm -rf "$tmp"
        echo "pytorch-prereqs: could not fetch $file (apt-get source $spec)" >&2
        exit 1
    fi
    mv "$tmp/$file" "$dest/$file"
    rm -rf "$tmp"
}
fetch pytorch=1.13.1+dfsg-4 pytorch_1.13.1+dfsg.orig.tar.xz \
    d0355588b8528566d477e6ebf1b4d9d036a6fd75711339f66b27472ce5879dc7
fetch fmtlib=9.1.0+ds1-2 fmtlib_9.1.0+ds1.orig.tar.gz \
    84ce1c2d0be3a9863935137969dcec6970125caac032f82474640bfc81463583
fetch pytorch=2.6.0+dfsg-7 pytorch_2.6.0+dfsg-7.debian.tar.xz \
    3290d4e5168b6e44191882213f61ad41c134a912fe11a44364c2e74f81f68af0
fetch pytorch=2.6.0+dfsg-7 pytorch_2.6.0+dfsg.orig.tar.xz \
    099a9601bc40d67656e75735c44abedb0fbe92d08817852ab7472eebb7e6ddff
echo "pytorch-prereqs: ok; archives in $dest"
