#!/usr/bin/env bash
# Install everything perfcast needs on a fresh Debian machine (idempotent).
# System packages: the compilers, MPI and tools perfcast drives; Python: perfcast itself
# with the optional analysis extras and the developer tools.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  clang-16 libclang-rt-16-dev llvm-16   # instrumentation (XRay, sancov, DataFlowSanitizer)
  libopenmpi-dev openmpi-bin            # MPI programs and the PMPI profiling layer
  valgrind                              # exact instruction counts (ground truth)
  slurm-wlm munge                       # the Slurm campaign backend (and its test)
  libsimgrid-dev                        # SimGrid/SMPI: smpirun replays traces on platforms
  chromium                              # headless browser: the HTML report's tests
)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

python3 -m pip install -q --disable-pip-version-check -e ".[dev,static,taint,thicket]"
