#!/usr/bin/env bash
# Set up orchestrator on a fresh Debian 12 machine and run the main job:
#   doit build variant=relwithdebinfo && doit switch variant=relwithdebinfo   (the demo recipe)
# Installs system packages with apt (root or sudo), the PyTorch recipes' prerequisites
# (.ci/pytorch-prereqs.sh), makes .venv from the system python3 (never conda's), installs
# this package into it, then builds and activates the demo. The test suite needs all of it.
set -euo pipefail
cd "$(dirname "$0")"

. .ci/steps.sh  # step (named, logged), apt_get (waits for the dpkg lock), next_steps

# What the tool and its tests need from the system: the interpreter and venv module, the
# compilers, gdb, nginx (WebDAV cache tests) and docker-registry (OCI cache tests), dpkg-dev (dpkg-deb) and apt (lldb-14 debs),
# and the shared libraries the unpacked lldb-14 links against that its debs do not carry.
PACKAGES=(python3 python3-venv python3-dev gcc g++ make gdb nginx-light docker-registry dpkg-dev ca-certificates curl zstd binutils distcc chromium
          libllvm14 libclang-cpp14 libedit2 libxml2)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
step "apt-get update" apt_get update -q
if [ ${#missing[@]} -gt 0 ]; then
  step "apt-get install ${#missing[@]} package(s)" \
    apt_get install -y -q --no-install-recommends "${missing[@]}"
fi

if [ ! -x .venv/bin/python ]; then
  step "make .venv from /usr/bin/python3" /usr/bin/python3 -m venv .venv
fi
# Editable as a plain path entry (compat): setuptools' default editable finder is imported by
# every interpreter of the venv at start-up (9 ms of a bare interpreter start).
step "pip install -e .[test]" .venv/bin/python -m pip install -q --disable-pip-version-check \
  -e '.[test]' --config-settings editable_mode=compat
# The project's own bytecode, as pip writes it for an installed package: an environment with
# PYTHONDONTWRITEBYTECODE=1 (common in CI images) otherwise compiles every module of every
# verb from source (about 30 ms of each doit command).
step "compile the project's bytecode" .venv/bin/python -m compileall -q orchestrator dodo.py

# The PyTorch recipes' prerequisites: deb-src entry, Debian build-deps, pinned tarballs
# (its own steps, numbered on from these).
.ci/pytorch-prereqs.sh
# The CUDA 12.4 debs of locks/cuda12.toml (~1 GB, unpacked less their static libraries) into the
# machine's deb cache, once: a cuda12 toolchain (the tests make one per run) then copies trees.
step "pre-fetch the CUDA 12.4 debs" .venv/bin/python -m orchestrator.toolchain.deb_install locks cuda12
# ... and those locks/pytorch2-cuda12.toml adds (the math libraries ATen links, ~650 MB).
step "pre-fetch PyTorch's CUDA 12.4 debs" .venv/bin/python -m orchestrator.toolchain.deb_install locks pytorch2-cuda12
# The CUDA torch toolchain (locks/cuda13-torch.toml: ~5.6 GB from ~3.8 GB of local wheels), once
# per machine into a store of its own that the tests reuse (tests/conftest.py MACHINE_TOOLCHAINS;
# a changed lock is a new directory there).
test_toolchains="${ORCH_TEST_TOOLCHAINS:-$HOME/.cache/orchestrator/test-toolchains}"
mkdir -p "$test_toolchains"
step "materialize the CUDA torch toolchain for the tests" .venv/bin/doit toolchain lock=cuda13-torch \
  store="$test_toolchains/cuda13-torch"

# The main job on the bundled demo: build, then make it the workspace's active profile.
step "doit build variant=relwithdebinfo" .venv/bin/doit build variant=relwithdebinfo
step "doit switch variant=relwithdebinfo" .venv/bin/doit switch variant=relwithdebinfo
next_steps
