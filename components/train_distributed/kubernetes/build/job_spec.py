"""One typed description of a training job on a cluster, validated once.

`ClusterJobSpec` says what runs (image, command, strategy), how many replicas
of each type, with which resources, storage, scheduling and run policy. The
renderers (`render_tfjob`, `render_mpijob`) turn it into a TFJob or MPIJob; its
`validate()` runs first and rejects, with the bad value and the valid ones,
everything the API server would refuse, silently drop, or accept and then
never run. The smaller records live in `job_parts`, the checks in
`job_validation`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from typing import Dict, Mapping, Optional, Tuple

from kfdist.components.common.errors import require
from kfdist.components.train_distributed.kubernetes.build import k8s_syntax as k8s
from kfdist.components.train_distributed.kubernetes.build.job_parts import (
    PvcMount, ReplicaOverride, Resources, RunPolicy, Toleration)

TFJOB_BACKEND = "tfjob"
MPIJOB_BACKEND = "mpijob"
#: Strategies each cluster backend runs.
STRATEGIES_BY_CLUSTER_BACKEND: Dict[str, Tuple[str, ...]] = {
    TFJOB_BACKEND: ("multi_worker_mirrored", "parameter_server", "mirrored"),
    MPIJOB_BACKEND: ("horovod",),
}
#: Replica types of each backend, in rendering order.
REPLICA_TYPES: Dict[str, Tuple[str, ...]] = {
    TFJOB_BACKEND: ("Chief", "PS", "Worker", "Evaluator"),
    MPIJOB_BACKEND: ("Launcher", "Worker"),
}
RESTART_POLICIES: Dict[str, Tuple[str, ...]] = {
    TFJOB_BACKEND: ("Never", "OnFailure", "ExitCode", "Always"),
    MPIJOB_BACKEND: ("Never", "OnFailure"),  # the MPI Operator's validation accepts no others
}
MPI_IMPLEMENTATIONS = ("OpenMPI", "Intel", "MPICH")
SUCCESS_POLICIES = ("AllWorkers",)
#: Set by the operators; a user may not set them.
RESERVED_ENV = ("TF_CONFIG",)
#: Labels tying a job (and its pods) to the KFP run and task that launched it.
RUN_ID_LABEL = "kfdist.dev/run-id"
TASK_LABEL = "kfdist.dev/task"
#: `job_name_for` names are at most this long, leaving room for `-evaluator-9999`.
GENERATED_NAME_MAX = 40


@dataclasses.dataclass(frozen=True)
class ClusterJobSpec:
    """A distributed training job on Kubernetes, for either operator.

    Attributes:
      name: Job name: a DNS-1035 label short enough for the operator's pod
        names (`<name>-worker-<i>`, `<name>-launcher`) to stay within 63 characters.
      namespace: Namespace of the job.
      backend: `tfjob` (Training Operator) or `mpijob` (MPI Operator).
      strategy: `multi_worker_mirrored`, `parameter_server` or `mirrored`
        (tfjob), `horovod` (mpijob).
      image: Image of every replica, with a pinned tag or digest.
      command: Program every replica runs (tfjob; empty: the image entrypoint)
        or every MPI rank runs (mpijob: the launcher wraps it in `mpirun`,
        unless it starts with `mpirun`, `mpiexec` or `horovodrun`).
      args: Arguments after `command`.
      env: Extra environment of every replica.
      workers: Worker replicas (>= 1).
      ps: Parameter-server replicas (`parameter_server` only).
      chief: Whether to add a Chief replica (tfjob). `parameter_server` needs
        one: it is the coordinator.
      evaluator: Whether to add a side-car Evaluator replica (tfjob).
      resources: Resources of each worker, and of the chief and evaluator
        (the PS, and the chief under `parameter_server`, get them without GPUs).
      overrides: Per replica type (`Chief`, `PS`, `Worker`, `Evaluator`,
        `Launcher`) resources or restart policy.
      slots_per_worker: MPI processes per worker (mpijob); default: the
        worker's GPUs, or 1.
      mpi_implementation: `OpenMPI` (default), `Intel` or `MPICH` (mpijob).
      ssh_auth_mount_path: Where the MPI Operator mounts the SSH keys
        (mpijob v2beta1; `/home/mpiuser/.ssh` for a non-root image).
      restart_policy: Restart policy of every replica type without an override.
      run_policy: Cleanup, deadline, retries and gang scheduling.
      success_policy: `AllWorkers` (tfjob): succeed only when every worker
        has; by default the chief (or worker 0) decides.
      node_selector: Node labels every replica requires.
      tolerations: Taints every replica tolerates.
      volumes: PVCs mounted into every replica.
      service_account: Service account of the replica pods.
      image_pull_secrets: Secrets for pulling `image`.
      labels: Labels of the job and of its pods (see `run_labels`).
      annotations: Annotations of the job.
      istio_sidecar: Allow Istio to inject its sidecar; by default pods are
        annotated `sidecar.istio.io/inject: "false"` (a sidecar keeps a
        finished replica's pod running, so the job never completes).
    """

    name: str
    namespace: str
    backend: str
    strategy: str
    image: str
    workers: int
    command: Tuple[str, ...] = ()
    args: Tuple[str, ...] = ()
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    ps: int = 0
    chief: bool = False
    evaluator: bool = False
    resources: Resources = Resources()
    overrides: Mapping[str, ReplicaOverride] = dataclasses.field(default_factory=dict)
    slots_per_worker: Optional[int] = None
    mpi_implementation: Optional[str] = None
    ssh_auth_mount_path: Optional[str] = None
    restart_policy: str = "Never"
    run_policy: RunPolicy = RunPolicy()
    success_policy: Optional[str] = None
    node_selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    tolerations: Tuple[Toleration, ...] = ()
    volumes: Tuple[PvcMount, ...] = ()
    service_account: Optional[str] = None
    image_pull_secrets: Tuple[str, ...] = ()
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)
    istio_sidecar: bool = False

    def replica_counts(self) -> Dict[str, int]:
        """Replicas of each present replica type, in rendering order."""
        if self.backend == MPIJOB_BACKEND:
            return {"Launcher": 1, "Worker": self.workers}
        counts = {"Chief": 1 if self.chief else 0, "PS": self.ps, "Worker": self.workers,
                  "Evaluator": 1 if self.evaluator else 0}
        return {rtype: n for rtype, n in counts.items() if n}

    def resources_for(self, replica_type: str) -> Resources:
        """Resources of one replica of `replica_type` (overrides first)."""
        override = self.overrides.get(replica_type)
        if override is not None and override.resources is not None:
            return override.resources
        if replica_type == "Launcher":
            return Resources()  # runs mpirun only; GPUs belong on the workers
        if replica_type == "PS" or (replica_type == "Chief" and self.strategy == "parameter_server"):
            return self.resources.without_gpus()
        return self.resources

    def restart_policy_for(self, replica_type: str) -> str:
        """Restart policy of `replica_type` (overrides first)."""
        override = self.overrides.get(replica_type)
        if override is not None and override.restart_policy is not None:
            return override.restart_policy
        return self.restart_policy

    def effective_slots_per_worker(self) -> int:
        """MPI slots per worker: as set, else the worker's GPUs, else 1."""
        if self.slots_per_worker is not None:
            return self.slots_per_worker
        return max(1, self.resources_for("Worker").gpus)

    def longest_pod_hostname(self) -> str:
        """The longest pod or service name the operator derives from `name`."""
        names = [f"{self.name}-{rtype.lower()}-{n - 1}" for rtype, n in self.replica_counts().items()
                 if rtype != "Launcher"]
        if self.backend == MPIJOB_BACKEND:
            names.append(f"{self.name}-launcher")  # the launcher pod's hostname
        return max(names, key=len)

    def replica_env(self) -> Tuple[Tuple[str, str], ...]:
        """Environment of every replica (the operator adds TF_CONFIG)."""
        return tuple(self.env.items())

    def validate(self) -> None:
        """Checks every field and their combinations, before any API call.

        Raises:
          InvalidInputError: Naming the first bad value and what would be valid.
        """
        from kfdist.components.train_distributed.kubernetes.build import job_validation

        job_validation.validate_cluster_job(self)


def job_name_for(run_id: str, task_name: str) -> str:
    """A deterministic job name for a KFP task: a retried step finds its own job.

    Args:
      run_id: The KFP run id.
      task_name: The task's name within the run.

    Returns:
      `kfdist-<task slug>-<8 hex of sha256(run_id, task_name)>`, a DNS-1035
      label of at most `GENERATED_NAME_MAX` characters.
    """
    require(isinstance(run_id, str) and bool(run_id), f"run_id must be a non-empty string, got {run_id!r}")
    require(isinstance(task_name, str) and bool(task_name),
            f"task_name must be a non-empty string, got {task_name!r}")
    digest = hashlib.sha256(f"{run_id}\0{task_name}".encode()).hexdigest()[:8]
    room = GENERATED_NAME_MAX - len("kfdist--") - len(digest)
    slug = re.sub(r"[^a-z0-9]+", "-", task_name.lower()).strip("-")[:room].strip("-")
    return f"kfdist-{slug}-{digest}" if slug else f"kfdist-{digest}"


def run_labels(run_id: str, task_name: str) -> Dict[str, str]:
    """Labels tying a job and its pods to the KFP run and task that launched it."""
    return {RUN_ID_LABEL: k8s.to_label_value(run_id), TASK_LABEL: k8s.to_label_value(task_name)}
