#!/usr/bin/env bash
# The system packages the tests need, installed with apt when one is missing (as root, or through
# sudo): headless Chromium renders the evaluation report in a test, and with ChromeDriver drives
# the Kubeflow Pipelines UI in the browser tests (the UI builds with the machine's Node.js); sshd checks the Horovod image's
# SSH configuration; OpenMPI, CMake and g++ build Horovod, whose `horovod` strategy runs under
# mpirun; podman (with buildah, runc, uidmap) builds and runs kfdist's images, and debootstrap
# builds their Debian base where no registry is reachable (containers/build.sh); the cluster test
# bed's genuine node runs pods with runc, gives kube-proxy iptables and conntrack, and builds its
# volume helpers' image from busybox-static (tests/cluster/node_images.py); Kubeflow Pipelines'
# API server on the bed keeps its runs in MariaDB (tests/cluster/kfp.py).
set -euo pipefail

PACKAGES=(chromium chromium-driver openssh-server openmpi-bin libopenmpi-dev cmake g++ make
          podman buildah runc uidmap debootstrap curl iptables conntrack busybox-static
          mariadb-server)

missing=()
for package in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "${package}" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("${package}")
done
sudo=()
[ "$(id -u)" = 0 ] || sudo=(sudo)

# Podman's configuration: runc (crun cannot set the default rlimits in some VMs, and then fails
# every container), and no default ulimits, which an unprivileged VM may not raise.
configure_podman() {
  local conf=/etc/containers/containers.conf
  if ! grep -qs '^runtime = "runc"' "$conf"; then
    "${sudo[@]}" mkdir -p /etc/containers
    printf '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n' \
      | "${sudo[@]}" tee "$conf" >/dev/null
  fi
}

if [ "${#missing[@]}" -eq 0 ]; then
  configure_podman
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install these packages with your system's package manager: ${missing[*]}" >&2
  exit 1
fi
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
  "${missing[@]}" >/dev/null
configure_podman
