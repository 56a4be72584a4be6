"""kfdist: distributed TensorFlow training as Kubeflow Pipelines components.

Importing kfdist selects legacy Keras (tf-keras) for every TensorFlow import
that follows: distributed Keras training (MultiWorkerMirrored, ParameterServer,
Horovod) only works with it in TensorFlow 2.16+. A value already set in the
environment is respected.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

__version__ = "0.1.0"

#: Where kfdist's images are published (containers/build.sh; `--registry` points elsewhere).
DEFAULT_REGISTRY = "ghcr.io/kfdist"
#: The component runtime image the compiled pipelines reference (see containers/).
RUNTIME_IMAGE = f"{DEFAULT_REGISTRY}/kfdist-runtime:{__version__}"
#: The MPIJob image (OpenMPI, sshd, Horovod; user `mpiuser`), see containers/horovod.
HOROVOD_IMAGE = f"{DEFAULT_REGISTRY}/kfdist-horovod:{__version__}"
#: The user and group every kfdist image runs as (non-root; `mpiuser` in the Horovod image).
IMAGE_UID = IMAGE_GID = 1000
#: Where the MPI Operator mounts the SSH keys in HOROVOD_IMAGE (its non-root user's home).
HOROVOD_IMAGE_SSH_DIR = "/home/mpiuser/.ssh"
