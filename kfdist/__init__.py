"""kfdist: distributed TensorFlow training as Kubeflow Pipelines components.

Importing kfdist changes nothing in the environment: a user's program that
imports `kfdist.program` gets the Keras its own code asks for. kfdist's own
modules that load TensorFlow choose tf-keras themselves, first
(`kfdist.components.common.legacy_keras`; `own_env` says why and keeps those
variables from every program kfdist starts).
"""

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
