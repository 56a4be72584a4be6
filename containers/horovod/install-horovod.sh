#!/usr/bin/env bash
# Installs Horovod 0.28.1 (TensorFlow + MPI) into the active Python environment, for the
# `horovod` strategy on this machine. Does nothing when Horovod's TensorFlow ops already load.
# Needs OpenMPI, CMake and a C++ compiler; installs them with apt-get when run as root.
set -euo pipefail

python=${PYTHON:-python}
if "$python" -c "import horovod.tensorflow.mpi_ops" >/dev/null 2>&1; then
  exit 0
fi

missing=()
for tool in mpirun mpicc cmake g++; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      openmpi-bin libopenmpi-dev cmake g++ make >/dev/null
  else
    echo "install-horovod: missing ${missing[*]}; install openmpi-bin libopenmpi-dev cmake g++ first" >&2
    exit 1
  fi
fi

# Horovod compiles against the TensorFlow installed here, so no build isolation; its build
# imports setuptools and wheel from this environment.
"$python" -m pip install -q "setuptools<70" wheel
echo "install-horovod: building Horovod 0.28.1 against TensorFlow (a few minutes)" >&2
HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITHOUT_GLOO=1 \
HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
  "$python" -m pip install -q --no-build-isolation horovod==0.28.1
"$python" -c "import horovod.tensorflow.mpi_ops"
