#!/usr/bin/env bash
# Builds Horovod 0.28.1 (TensorFlow + MPI) from its sdist against the TensorFlow installed in the
# active Python environment, with the two patches kfdist needs, and installs it there; or, with
# --wheel-dir DIR, only writes the wheel into DIR (the Horovod image's build stage does that).
#
#   bash containers/horovod/install-horovod.sh              # install here (skipped when built)
#   bash containers/horovod/install-horovod.sh --wheel-dir /wheels [--prebuilt DIR]
#
# Installing here keeps the wheel, and the TensorFlow version it was built against, in
# <environment>/share/kfdist/horovod-wheel. `containers/build.sh --horovod-wheel-dir` hands that
# folder to the Horovod image's build stage, which runs this script with --prebuilt: the wheel is
# used when it was built against the image's TensorFlow version and its ops library loads there,
# and Horovod is compiled otherwise.
#
# The patches:
#   1. horovod/tensorflow/CMakeLists.txt: drop xla_mpi_ops.cc. Its XLA headers moved in
#      TensorFlow 2.18+, and kfdist never uses Horovod's XLA ops.
#   2. horovod/tensorflow/keras/{__init__,callbacks}.py: take the Keras backend from
#      tf.keras (tf-keras under TF_USE_LEGACY_KERAS=1) instead of a bare `import keras`
#      (Keras 3), whose backend lacks constant/get_value/set_value.
# Needs OpenMPI, CMake and a C++ compiler; installs them with apt-get when run as root.
set -euo pipefail

HOROVOD_VERSION=0.28.1
python=${PYTHON:-python}
wheel_dir=""
prebuilt=""
while [ $# -gt 0 ]; do
  case "$1" in
    --wheel-dir) wheel_dir=${2:?"--wheel-dir needs a directory"}; shift 2 ;;
    --prebuilt) prebuilt=${2:?"--prebuilt needs a directory"}; shift 2 ;;
    *) echo "install-horovod: unknown argument '$1'; expected nothing, or --wheel-dir DIR" \
         "[--prebuilt DIR]" >&2
       exit 2 ;;
  esac
done
if [ -n "$prebuilt" ] && [ -z "$wheel_dir" ]; then
  echo "install-horovod: --prebuilt goes with --wheel-dir" >&2
  exit 2
fi

# Built already, against this TensorFlow: its ops library loads only when the ABI matches.
if [ -z "$wheel_dir" ] && "$python" - >/dev/null 2>&1 <<EOF
import horovod, horovod.tensorflow.mpi_ops
assert horovod.__version__ == "$HOROVOD_VERSION"
EOF
then
  exit 0
fi

tensorflow_version() {
  "$python" -c 'from importlib.metadata import version; print(version("tensorflow"))'
}

# --prebuilt DIR: its wheel into --wheel-dir when it was built against this TensorFlow and loads.
use_prebuilt() {
  local wheels=("$prebuilt"/horovod-"$HOROVOD_VERSION"-*.whl) built here target
  [ -f "${wheels[0]}" ] && [ -f "$prebuilt/tensorflow-version" ] || return 1
  built=$(cat "$prebuilt/tensorflow-version")
  here=$(tensorflow_version)
  if [ "$built" != "$here" ]; then
    echo "install-horovod: the prebuilt wheel was built against TensorFlow $built, not $here:" \
      "building" >&2
    return 1
  fi
  target=$(mktemp -d)
  "$python" -m pip install -q --no-cache-dir --target "$target" "${wheels[0]}"
  if ! PYTHONPATH="$target" "$python" -c "import horovod.tensorflow.mpi_ops" >/dev/null 2>&1; then
    rm -rf "$target"
    echo "install-horovod: the prebuilt wheel does not load against this TensorFlow: building" >&2
    return 1
  fi
  rm -rf "$target"
  mkdir -p "$wheel_dir"
  cp "${wheels[0]}" "$wheel_dir/"
  echo "install-horovod: using the prebuilt $(basename "${wheels[0]}") (TensorFlow $built)" >&2
}

missing=()
for tool in mpirun mpicc cmake g++ make; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      openmpi-bin libopenmpi-dev cmake g++ make >/dev/null
  else
    echo "install-horovod: missing ${missing[*]}; install openmpi-bin libopenmpi-dev cmake g++ make first" >&2
    exit 1
  fi
fi

if [ -n "$prebuilt" ] && use_prebuilt; then
  exit 0
fi

# The wheel built here for this Horovod, TensorFlow and Python, kept outside the checkout
# ($KFDIST_HOROVOD_CACHE, or ~/.cache/kfdist/horovod): a new environment installs it again instead
# of compiling, when its ops library loads there.
cache=${KFDIST_HOROVOD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kfdist/horovod}
cache_key="$HOROVOD_VERSION-tf$(tensorflow_version)-$("$python" -c \
  'import sys; print("py%d.%d" % sys.version_info[:2])')"
kept="$("$python" -c 'import sys; print(sys.prefix)')/share/kfdist/horovod-wheel"
if [ -z "$wheel_dir" ] && [ -f "$cache/$cache_key/tensorflow-version" ]; then
  rm -rf "$kept" && mkdir -p "$kept" && cp "$cache/$cache_key"/* "$kept"/
  if "$python" -m pip install -q --no-cache-dir "$kept"/horovod-"$HOROVOD_VERSION"-*.whl \
      && "$python" -c "import horovod.tensorflow.mpi_ops" 2>/dev/null; then
    echo "install-horovod: Horovod $HOROVOD_VERSION installed from the build cache ($cache_key)" >&2
    exit 0
  fi
  echo "install-horovod: the cached wheel ($cache_key) does not load here: building" >&2
fi

src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
"$python" -m pip download -q --no-cache-dir --no-deps --no-binary :all: --dest "$src" \
  "horovod==$HOROVOD_VERSION"
tar -xzf "$src/horovod-$HOROVOD_VERSION.tar.gz" -C "$src"
tree="$src/horovod-$HOROVOD_VERSION"

sed -i '/xla_mpi_ops\.cc/d' "$tree/horovod/tensorflow/CMakeLists.txt"
if grep -q 'xla_mpi_ops' "$tree/horovod/tensorflow/CMakeLists.txt"; then
  echo "install-horovod: could not drop xla_mpi_ops.cc from horovod/tensorflow/CMakeLists.txt" >&2
  exit 1
fi
for module in __init__ callbacks; do
  file="$tree/horovod/tensorflow/keras/$module.py"
  sed -i 's/^\( *\)from keras import backend as K$/\1K = keras.backend/' "$file"
  grep -q '^ *K = keras.backend$' "$file" || {
    echo "install-horovod: could not patch the Keras backend import in $file" >&2
    exit 1
  }
done

# Horovod compiles against the TensorFlow installed here, so no build isolation and no cache:
# pip would otherwise reuse a wheel built against another TensorFlow. Its setup.py needs
# setuptools<70 and wheel, which go into a folder on PYTHONPATH for the build only: the
# environment keeps its own setuptools (torch needs a newer one).
"$python" -m pip install -q --no-cache-dir --no-warn-conflicts --target "$src/build-tools" \
  "setuptools<70" wheel
build_path="$src/build-tools${PYTHONPATH:+:$PYTHONPATH}"
echo "install-horovod: building Horovod $HOROVOD_VERSION against TensorFlow" \
  "$(tensorflow_version) (a few minutes)" >&2
export HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITHOUT_GLOO=1 \
  HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS="-j$(nproc)"
if [ -n "$wheel_dir" ]; then
  PYTHONPATH="$build_path" "$python" -m pip wheel -q --no-cache-dir --no-build-isolation \
    --no-deps --wheel-dir "$wheel_dir" "$tree"
else
  rm -rf "$kept"
  PYTHONPATH="$build_path" "$python" -m pip wheel -q --no-cache-dir --no-build-isolation \
    --no-deps --wheel-dir "$kept" "$tree"
  tensorflow_version > "$kept/tensorflow-version"
  "$python" -m pip install -q --no-cache-dir "$kept"/horovod-"$HOROVOD_VERSION"-*.whl
  "$python" -c "import horovod.tensorflow.mpi_ops"
  mkdir -p "$cache" && rm -rf "$cache/$cache_key" && cp -r "$kept" "$cache/$cache_key"
fi
