#!/usr/bin/env bash
# Builds the cluster test bed's binaries from the Go modules pinned in tests/cluster/modules/ into a
# cache outside the checkout, and prints each binary's path (one `NAME PATH` line each on stdout).
#
#   bash tests/cluster/build.sh            # every binary the test bed runs
#   bash tests/cluster/build.sh NAME ...   # only these (e.g. kine, which the test bed does not use)
#
# A binary is rebuilt only when its module's pins, its package, its link flags or the Go version
# change: each lives in CACHE/NAME/VERSION-KEY/, KEY a hash of those. CACHE is
# $KFDIST_CLUSTER_CACHE, or ~/.cache/kfdist/cluster. Each build prints its minutes on stderr.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
modules=$here/modules
cache=${KFDIST_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kfdist/cluster}
go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
if ! "$go" version >/dev/null 2>&1; then
  echo "build.sh: no Go toolchain at '$go'; install Go 1.26 or set GO to its go binary" >&2
  exit 1
fi

# The version a module's go.mod requires of MODULE (`require M V` or, in a block, `M V`).
required_version() {
  awk -v m="$2" '$1 == m && $2 ~ /^v/ { print $2; exit }
                 $1 == "require" && $2 == m { print $3; exit }' "$modules/$1/go.mod"
}

kube_version=$(required_version kubernetes k8s.io/kubernetes)
kube_minor=${kube_version#v1.}; kube_minor=${kube_minor%%.*}
# kube-apiserver reports this as its version (Kueue refuses a server whose version is not semver).
kube_ldflags="-X k8s.io/component-base/version.gitVersion=$kube_version"
kube_ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
kube_ldflags+=" -X k8s.io/component-base/version.gitMinor=$kube_minor"
kube_ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"

# NAME MODULE-DIR PACKAGE VERSION-OF (the module whose version names the build) [static: built
# without cgo, for an image with nothing else in it or a plugin any host can run]
BINARIES=(
  "kube-apiserver kubernetes k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes"
  "kube-controller-manager kubernetes k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes"
  "kube-scheduler kubernetes k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes"
  # The node: the kubelet on containerd and runc (Debian's), CNI's plugins, kube-proxy; CoreDNS
  # and the volume provisioner run as pods, from images of their static binaries.
  "kubelet kubernetes k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes"
  "kube-proxy kubernetes k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes"
  "containerd containerd github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2 static"
  "containerd-shim-runc-v2 containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 github.com/containerd/containerd/v2 static"
  "ctr containerd github.com/containerd/containerd/v2/cmd/ctr github.com/containerd/containerd/v2 static"
  "bridge cni-plugins github.com/containernetworking/plugins/plugins/main/bridge github.com/containernetworking/plugins static"
  "host-local cni-plugins github.com/containernetworking/plugins/plugins/ipam/host-local github.com/containernetworking/plugins static"
  "loopback cni-plugins github.com/containernetworking/plugins/plugins/main/loopback github.com/containernetworking/plugins static"
  "portmap cni-plugins github.com/containernetworking/plugins/plugins/meta/portmap github.com/containernetworking/plugins static"
  "coredns coredns github.com/coredns/coredns github.com/coredns/coredns static"
  "local-path-provisioner local-path-provisioner github.com/rancher/local-path-provisioner github.com/rancher/local-path-provisioner static"
  "crictl cri-tools sigs.k8s.io/cri-tools/cmd/crictl sigs.k8s.io/cri-tools static"
  "etcd etcd . go.etcd.io/etcd/server/v3"
  "training-operator training-operator github.com/kubeflow/training-operator/cmd/training-operator.v1 github.com/kubeflow/training-operator"
  "mpi-operator mpi-operator github.com/kubeflow/mpi-operator/cmd/mpi-operator github.com/kubeflow/mpi-operator"
  "jobset jobset sigs.k8s.io/jobset sigs.k8s.io/jobset"
  "trainer-controller-manager trainer github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager github.com/kubeflow/trainer/v2"
  "kueue kueue sigs.k8s.io/kueue/cmd/kueue sigs.k8s.io/kueue"
  # The Trainer v2.1 bed's (tests/cluster/trainer_v2_1.py).
  "trainer-controller-manager-v2.1 trainer-v2.1 github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager github.com/kubeflow/trainer/v2"
  "jobset-v0.10 jobset-v0.10 sigs.k8s.io/jobset sigs.k8s.io/jobset"
)
# Built only when named.
OPTIONAL=(
  "kine kine github.com/k3s-io/kine github.com/k3s-io/kine"
)

wanted=("$@")
selected=()
for entry in "${BINARIES[@]}" "${OPTIONAL[@]}"; do
  read -r name _ <<<"$entry"
  if [ ${#wanted[@]} -eq 0 ]; then
    for default in "${BINARIES[@]}"; do [ "$default" = "$entry" ] && selected+=("$entry"); done
  else
    for w in "${wanted[@]}"; do [ "$w" = "$name" ] && selected+=("$entry"); done
  fi
done
if [ ${#wanted[@]} -gt 0 ] && [ ${#selected[@]} -ne ${#wanted[@]} ]; then
  names=$(for e in "${BINARIES[@]}" "${OPTIONAL[@]}"; do printf '%s ' "${e%% *}"; done)
  echo "build.sh: unknown binary in '${wanted[*]}'; valid names: $names" >&2
  exit 2
fi

go_version=$("$go" env GOVERSION)
for entry in "${selected[@]}"; do
  read -r name dir package version_of static <<<"$entry"
  cgo=1
  [ "$static" = static ] && cgo=0
  ldflags="-s -w"
  [ "$dir" = kubernetes ] && ldflags+=" $kube_ldflags"
  version=$(required_version "$dir" "$version_of")
  key=$( { echo "$go_version $package $ldflags cgo=$cgo"; cat "$modules/$dir"/go.mod "$modules/$dir"/go.sum;
           cat "$modules/$dir"/*.go 2>/dev/null || true; } | sha256sum | cut -c1-16)
  target=$cache/$name/$version-$key
  if [ ! -x "$target/$name" ]; then
    echo "build.sh: building $name $version (cache: $target)" >&2
    started=$(date +%s)
    mkdir -p "$cache/$name"
    staging=$(mktemp -d "$cache/$name/.building.XXXXXX")
    trap 'rm -rf "$staging"' EXIT
    (cd "$modules/$dir" && CGO_ENABLED=$cgo "$go" build -mod=readonly -trimpath -ldflags "$ldflags" \
       -o "$staging/$name" "$package")
    rm -rf "$target"
    mv "$staging" "$target"
    trap - EXIT
    seconds=$(( $(date +%s) - started ))
    printf 'build.sh: built %s in %d min %02d s\n' "$name" $((seconds / 60)) $((seconds % 60)) >&2
  fi
  echo "$name $target/$name"
done
