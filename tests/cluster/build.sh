#!/usr/bin/env bash
# Builds the cluster test bed's binaries from the Go modules pinned in tests/cluster/modules/ into a
# cache outside the checkout, and prints each binary's path (one `NAME PATH` line each on stdout).
#
#   bash tests/cluster/build.sh            # every binary the test beds run, KFP's included
#   bash tests/cluster/build.sh NAME ...   # only these (e.g. kine, which the test bed does not use)
#   bash tests/cluster/build.sh kfp        # Kubeflow Pipelines' backend and UI, Argo and MinIO
#                                          # (--with-kfp)
#
# A binary is rebuilt only when its module's pins, its package, its link flags or the Go version
# change: each lives in CACHE/NAME/VERSION-KEY/, KEY a hash of those. CACHE is
# $KFDIST_CLUSTER_CACHE, or ~/.cache/kfdist/cluster. Each build prints its minutes on stderr.
#
# Kubeflow Pipelines' own commands build in its source tree, whose go.mod replaces its api and
# kubernetes_platform modules with relative paths (the Go module proxy may not serve the project
# itself): KFP_SOURCE is a checkout of kubeflow/pipelines at tag KFP_VERSION, by default the
# exported copy beside this repository (../shared/upstream/kubeflow-pipelines-KFP_VERSION).
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
  "mpi-operator mpi-operator github.com/kubeflow/mpi-operator/cmd/mpi-operator github.com/kubeflow/mpi-operator static"
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
# Kubeflow Pipelines on the bed (`up.sh DIR --with-kfp`): Argo's controller and executor, MinIO
# and the gRPC-Web proxy the UI reads MLMD through from wrapper modules; `kfp` names them, the KFP
# commands below and the UI (build_ui.sh).
KFP_MODULE_BINARIES=(
  "workflow-controller argo-workflows github.com/argoproj/argo-workflows/v4/cmd/workflow-controller github.com/argoproj/argo-workflows/v4 static"
  "argoexec argo-workflows github.com/argoproj/argo-workflows/v4/cmd/argoexec github.com/argoproj/argo-workflows/v4 static"
  "minio minio github.com/minio/minio github.com/minio/minio static"
  "grpcwebproxy grpc-web github.com/improbable-eng/grpc-web/go/grpcwebproxy github.com/improbable-eng/grpc-web static"
)
# NAME PACKAGE (in KFP_SOURCE) [static]. The API server needs cgo (its storage uses
# go-sqlite3's error types); the driver and the launcher are copied into images of their own and
# into each step's container, so they are static, as KFP's Dockerfiles build them.
KFP_VERSION=2.17.0
KFP_SOURCE=${KFP_SOURCE:-$here/../../../shared/upstream/kubeflow-pipelines-$KFP_VERSION}
KFP_BINARIES=(
  "kfp-apiserver ./backend/src/apiserver"
  "kfp-persistence-agent ./backend/src/agent/persistence static"
  "kfp-scheduledworkflow ./backend/src/crd/controller/scheduledworkflow static"
  "kfp-driver ./backend/src/v2/cmd/driver static"
  "kfp-launcher ./backend/src/v2/cmd/launcher-v2 static"
)

wanted=()
with_kfp=0
[ $# -eq 0 ] && with_kfp=1  # the genuine node's bed runs Kubeflow Pipelines in the tests
for w in "$@"; do
  if [ "$w" = kfp ]; then with_kfp=1; else wanted+=("$w"); fi
done
selected=()
kfp_selected=()
for entry in "${BINARIES[@]}" "${OPTIONAL[@]}" "${KFP_MODULE_BINARIES[@]}"; do
  read -r name _ <<<"$entry"
  if [ $# -eq 0 ]; then
    for default in "${BINARIES[@]}" "${KFP_MODULE_BINARIES[@]}"; do
      [ "$default" = "$entry" ] && selected+=("$entry")
    done
  else
    for k in "${KFP_MODULE_BINARIES[@]}"; do
      [ $with_kfp = 1 ] && [ "$k" = "$entry" ] && selected+=("$entry")
    done
    for w in "${wanted[@]}"; do [ "$w" = "$name" ] && selected+=("$entry"); done
  fi
done
for entry in "${KFP_BINARIES[@]}"; do
  read -r name _ <<<"$entry"
  [ $with_kfp = 1 ] && kfp_selected+=("$entry") && continue
  for w in "${wanted[@]}"; do [ "$w" = "$name" ] && kfp_selected+=("$entry"); done
done
if [ $(( ${#selected[@]} + ${#kfp_selected[@]} )) -lt ${#wanted[@]} ]; then
  names=$(for e in "${BINARIES[@]}" "${OPTIONAL[@]}" "${KFP_MODULE_BINARIES[@]}" \
                   "${KFP_BINARIES[@]}"; do printf '%s ' "${e%% *}"; done)
  echo "build.sh: unknown binary in '${wanted[*]}'; valid names: kfp $names" >&2
  exit 2
fi
if [ ${#kfp_selected[@]} -gt 0 ] && [ ! -f "$KFP_SOURCE/go.mod" ]; then
  echo "build.sh: no Kubeflow Pipelines source at KFP_SOURCE='$KFP_SOURCE'; set KFP_SOURCE to" \
       "a checkout of github.com/kubeflow/pipelines at tag $KFP_VERSION" >&2
  exit 2
fi

go_version=$("$go" env GOVERSION)
# Go's build cache for these builds: beside the binaries, and removed at the end of a run that
# built one. A cold build leaves about 17 GB in it, which only a later version change of one
# module would reuse (that build then takes a few minutes longer), and a full disk stops etcd.
export GOCACHE=$cache/.go-build
built=0

# build NAME VERSION BUILD-DIR PACKAGE CGO LDFLAGS TAGS FILE...: builds into the cache unless it is
# there, and prints `NAME PATH`; the key hashes the build's settings and the FILEs (the pins).
build() {
  local name=$1 version=$2 dir=$3 package=$4 cgo=$5 ldflags=$6 tags=$7
  shift 7
  local key target started seconds settings="$go_version $package $ldflags cgo=$cgo"
  [ -n "$tags" ] && settings+=" tags=$tags"
  key=$( { echo "$settings"; cat "$@" 2>/dev/null || true; } | sha256sum | cut -c1-16)
  target=$cache/$name/$version-$key
  if [ ! -x "$target/$name" ]; then
    echo "build.sh: building $name $version (cache: $target)" >&2
    started=$(date +%s)
    mkdir -p "$cache/$name"
    staging=$(mktemp -d "$cache/$name/.building.XXXXXX")
    trap 'rm -rf "$staging"' EXIT
    (cd "$dir" && CGO_ENABLED=$cgo "$go" build -mod=readonly -trimpath -tags "$tags" \
       -ldflags "$ldflags" ${modfile:+-modfile "$modfile"} -o "$staging/$name" "$package")
    rm -rf "$target"
    mv "$staging" "$target"
    trap - EXIT
    built=1
    seconds=$(( $(date +%s) - started ))
    printf 'build.sh: built %s in %d min %02d s\n' "$name" $((seconds / 60)) $((seconds % 60)) >&2
  fi
  echo "$name $target/$name"
}

# Argo's executor package has its Linux signal handling in a symbolic link to the Darwin file
# (workflow/executor/osspecific/signal_linux.go -> signal_darwin.go), and a module's zip leaves
# symbolic links out (nor may `go build -overlay` add files to the module cache): the build uses
# a copy of the module with the link put back, through a go.mod of its own (`-modfile`) that
# replaces the module with that copy. Prints the go.mod's path.
argo_modfile() {
  local version=$1 module copy=$cache/argo-workflows-src/$1
  if [ ! -e "$copy/workflow/executor/osspecific/signal_linux.go" ]; then
    module=$(cd "$modules/argo-workflows" && "$go" mod download -json \
             "github.com/argoproj/argo-workflows/v4@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
    rm -rf "$copy" && mkdir -p "$(dirname "$copy")"
    cp -r "$module" "$copy.partial" && chmod -R u+w "$copy.partial"
    ln -s signal_darwin.go "$copy.partial/workflow/executor/osspecific/signal_linux.go"
    mv "$copy.partial" "$copy"
  fi
  cp "$modules/argo-workflows/go.mod" "$copy.mod"
  cp "$modules/argo-workflows/go.sum" "$copy.sum"
  echo "replace github.com/argoproj/argo-workflows/v4 => $copy" >>"$copy.mod"
  echo "$copy.mod"
}

for entry in "${selected[@]}"; do
  read -r name dir package version_of static <<<"$entry"
  cgo=1
  [ "$static" = static ] && cgo=0
  ldflags="-s -w"
  [ "$dir" = kubernetes ] && ldflags+=" $kube_ldflags"
  version=$(required_version "$dir" "$version_of")
  modfile=""
  if [ "$dir" = argo-workflows ]; then
    ldflags+=" -X github.com/argoproj/argo-workflows/v4.version=$version"
    modfile=$(argo_modfile "$version")
  fi
  build "$name" "$version" "$modules/$dir" "$package" "$cgo" "$ldflags" "" \
    "$modules/$dir"/go.mod "$modules/$dir"/go.sum "$modules/$dir"/*.go
done
modfile=""
# The source KFP's commands were built from: the bed applies its manifests.
[ ${#kfp_selected[@]} -gt 0 ] && echo "kfp-source $(cd "$KFP_SOURCE" && pwd)"
for entry in "${kfp_selected[@]}"; do
  read -r name package static <<<"$entry"
  cgo=1 tags=""
  [ "$static" = static ] && cgo=0 tags=netgo
  build "$name" "$KFP_VERSION" "$KFP_SOURCE" "$package" "$cgo" "-s -w" "$tags" \
    "$KFP_SOURCE"/go.mod "$KFP_SOURCE"/go.sum "$KFP_SOURCE"/VERSION
done
if [ $with_kfp = 1 ]; then
  bash "$here/build_ui.sh" "$KFP_SOURCE" "$cache"
fi
if [ $built = 1 ]; then
  rm -rf "$GOCACHE"
fi
