#!/usr/bin/env bash
# The system packages the tests need, installed with apt when one is missing (as root, or through
# sudo): headless Chromium renders the evaluation report in a test; sshd checks the Horovod image's
# SSH configuration; OpenMPI, CMake and g++ build Horovod, whose `horovod` strategy runs under
# mpirun.
set -euo pipefail

PACKAGES=(chromium openssh-server openmpi-bin libopenmpi-dev cmake g++ make)

missing=()
for package in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "${package}" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("${package}")
done
[ "${#missing[@]}" -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install these packages with your system's package manager: ${missing[*]}" >&2
  exit 1
fi
sudo=()
[ "$(id -u)" = 0 ] || sudo=(sudo)
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
  "${missing[@]}" >/dev/null
