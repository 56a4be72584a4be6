#!/usr/bin/env bash
# Builds kfdist's images from containers/*/Dockerfile, tags them REGISTRY/kfdist-IMAGE:TAG and,
# with --push, pushes them. The release workflow and the tests build with this same script.
#
#   bash containers/build.sh [--registry R] [--tag T] [--push] [--engine docker|podman]
#                            [--horovod-wheel-dir DIR] [IMAGE...]
#
#   --registry R   registry and namespace of the tags (default: ghcr.io/kfdist)
#   --tag T        tag of every image (default: kfdist.__version__ from kfdist/__init__.py)
#   --push         push each image after it is built
#   --engine E     docker (BuildKit) or podman (default: docker where its daemon answers, else podman)
#   --horovod-wheel-dir DIR   a Horovod wheel that install-horovod.sh built and kept
#                  (<environment>/share/kfdist/horovod-wheel), for the Horovod image to use instead
#                  of compiling Horovod when it loads against the image's TensorFlow
#   IMAGE          runtime, horovod, beam-worker, training-gpu (default: all; the runtime image is
#                  built first, since the others are built on it)
#
# The base is pinned once, in containers/runtime/Dockerfile (ARG BASE_IMAGE, a Debian 12 point
# release). Where that image cannot be pulled (no registry reachable), it is built from the Debian
# archive itself: `debootstrap --variant=minbase bookworm`, imported under the pinned name, after
# checking that the archive serves the pinned point release. That needs root and debootstrap.
# Where pip needs a CA bundle (PIP_CERT), it is given to the builds as a build secret, never
# copied into an image. The script ends with each image's size and layer count.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
all_images=(runtime horovod beam-worker training-gpu)

die() { echo "build.sh: $*" >&2; exit 2; }

registry=ghcr.io/kfdist
tag=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$repo/kfdist/__init__.py")
push=0
engine=""
wheel_dir=""
images=()
while [ $# -gt 0 ]; do
  case "$1" in
    --registry) registry=${2:-}; [ -n "$registry" ] || die "--registry needs a value, e.g. ghcr.io/my-org"; shift 2 ;;
    --tag) tag=${2:-}; [ -n "$tag" ] || die "--tag needs a value, e.g. 0.1.0"; shift 2 ;;
    --push) push=1; shift ;;
    --engine) engine=${2:-}; [ -n "$engine" ] || die "--engine needs a value: docker or podman"; shift 2 ;;
    --horovod-wheel-dir) wheel_dir=${2:-}; [ -n "$wheel_dir" ] || die "--horovod-wheel-dir needs a directory"; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) die "unknown option '$1'; valid: --registry R, --tag T, --push, --engine docker|podman, --horovod-wheel-dir DIR" ;;
    *) images+=("$1"); shift ;;
  esac
done
registry=${registry%/}
[[ "$registry" =~ ^[a-z0-9]([a-z0-9._:-]*[a-z0-9])?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)*$ ]] \
  || die "invalid --registry '$registry': lower-case host[:port][/namespace], e.g. ghcr.io/my-org"
[[ "$tag" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] \
  || die "invalid --tag '$tag': letters, digits, '_', '.', '-' (at most 128, not starting with '.' or '-')"
for image in "${images[@]}"; do
  [[ " ${all_images[*]} " == *" $image "* ]] || die "unknown image '$image'; valid: ${all_images[*]}"
done
[ ${#images[@]} -gt 0 ] || images=("${all_images[@]}")
if [[ " ${images[*]} " != *" runtime "* ]]; then
  images=(runtime "${images[@]}")  # the others are built on it: never on a stale one
fi

if [ -z "$engine" ]; then
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then engine=docker
  elif command -v podman >/dev/null 2>&1; then engine=podman
  else die "neither docker nor podman is installed (Debian: apt-get install podman buildah runc)"; fi
fi
case "$engine" in
  docker) export DOCKER_BUILDKIT=1 ;;
  podman) ;;
  *) die "invalid --engine '$engine'; valid: docker, podman" ;;
esac
command -v "$engine" >/dev/null 2>&1 || die "--engine $engine: '$engine' is not installed"

base=$(sed -n 's/^ARG BASE_IMAGE=//p' "$here/runtime/Dockerfile")
[ -n "$base" ] || die "containers/runtime/Dockerfile pins no ARG BASE_IMAGE"

# The base, pulled, or built from the Debian archive where no registry is reachable.
ensure_base() {
  if "$engine" image inspect "$base" >/dev/null 2>&1; then return; fi
  echo "build.sh: pulling $base" >&2
  if timeout 120 "$engine" pull -q "$base" >/dev/null 2>&1; then return; fi
  local release version mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
  release=$(sed -n 's/^.*debian:\([0-9][0-9.]*\)-slim$/\1/p' <<<"$base")
  [ -n "$release" ] || die "cannot pull $base, and only a debian:<point release>-slim base can be built from the archive"
  command -v debootstrap >/dev/null 2>&1 \
    || die "cannot pull $base and debootstrap is missing to build it (apt-get install debootstrap)"
  [ "$(id -u)" = 0 ] || die "cannot pull $base; building it from the Debian archive needs root (debootstrap)"
  version=$(curl -fsS "$mirror/dists/bookworm/Release" | sed -n 's/^Version: //p')
  [ "$version" = "$release" ] || die "cannot pull $base, and the Debian archive ($mirror) serves bookworm $version, not $release: pin debian:$version-slim in containers/runtime/Dockerfile"
  echo "build.sh: $base cannot be pulled; building it from $mirror (debootstrap bookworm $version)" >&2
  local root
  root=$(mktemp -d)
  # shellcheck disable=SC2064
  trap "rm -rf '$root'" EXIT
  debootstrap --variant=minbase bookworm "$root" "$mirror" >/dev/null
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/log/*.log
  tar -C "$root" -c . | "$engine" import --change 'CMD ["bash"]' - "$base" >/dev/null
  rm -rf "$root"
  trap - EXIT
}

build() {
  local image=$1 ref="$registry/kfdist-$1:$tag" deps_ref="$registry/kfdist-runtime-deps:$tag" args=()
  args+=(build --network host -f "$here/$image/Dockerfile" -t "$ref"
         --build-arg "VERSION=$tag")
  if [ "$image" != runtime ]; then
    args+=(--build-arg "RUNTIME_IMAGE=$registry/kfdist-runtime:$tag")
  fi
  if [ "$engine" = podman ]; then
    args+=(--ignorefile "$here/$image/Dockerfile.dockerignore" --layers --format docker)
  fi
  if [ -n "${PIP_CERT:-}" ] && [ -f "$PIP_CERT" ]; then
    args+=(--secret "id=pip-cert,src=$PIP_CERT")
  fi
  echo "build.sh: building $ref" >&2
  local start=$SECONDS previous
  previous=$("$engine" image inspect --format '{{.Id}}' "$ref" 2>/dev/null || true)
  "$engine" "${args[@]}" "$repo"
  echo "build.sh: built $ref in $((SECONDS - start)) s" >&2
  forget_previous "$ref" "$previous"
  if [ "$image" = runtime ]; then
    # Its dependency stage, from the layers just built (a cached step each).
    previous=$("$engine" image inspect --format '{{.Id}}' "$deps_ref" 2>/dev/null || true)
    local deps_args=() arg
    for arg in "${args[@]}"; do
      if [ "$arg" = "$ref" ]; then deps_args+=("$deps_ref"); else deps_args+=("$arg"); fi
    done
    "$engine" "${deps_args[@]}" --target deps -q "$repo" >/dev/null
    forget_previous "$deps_ref" "$previous"
  fi
  if [ "$push" = 1 ]; then "$engine" push "$ref"; fi
}

# Removes the image a rebuild took the tag from (untagged now, several GB each: rebuilt after
# every change, they would fill the disk of a machine that builds often). Its layers that the new
# image shares stay; an image still in use is left alone.
forget_previous() {
  local ref=$1 previous=$2 current
  current=$("$engine" image inspect --format '{{.Id}}' "$ref")
  if [ -n "$previous" ] && [ "$previous" != "$current" ]; then
    "$engine" rmi "$previous" >/dev/null 2>&1 || true
  fi
}

if [ -n "$wheel_dir" ]; then
  wheels=("$wheel_dir"/horovod-*.whl)
  [ -f "${wheels[0]}" ] && [ -f "$wheel_dir/tensorflow-version" ] \
    || die "--horovod-wheel-dir '$wheel_dir' holds no horovod-*.whl and tensorflow-version (what install-horovod.sh keeps in <environment>/share/kfdist/horovod-wheel)"
fi
prebuilt="$here/horovod/prebuilt"
clear_prebuilt() { rm -f "$prebuilt"/*.whl "$prebuilt/tensorflow-version"; }

ensure_base
for image in "${images[@]}"; do
  if [ "$image" = horovod ] && [ -n "$wheel_dir" ]; then
    trap clear_prebuilt EXIT
    cp "${wheels[0]}" "$wheel_dir/tensorflow-version" "$prebuilt/"
  fi
  build "$image"
  if [ "$image" = horovod ]; then clear_prebuilt; trap - EXIT; fi
done

printf '%-48s %10s %7s\n' IMAGE SIZE LAYERS
for image in "${images[@]}"; do
  ref="$registry/kfdist-$image:$tag"
  size=$("$engine" image inspect --format '{{.Size}}' "$ref")
  layers=$("$engine" image inspect --format '{{len .RootFS.Layers}}' "$ref")
  printf '%-48s %7d MB %7s\n' "$ref" $((size / 1000000)) "$layers"
done
