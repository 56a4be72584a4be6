"""One typed description of a training job on a cluster, validated once.

`ClusterJobSpec` says how a job's `layout` (the replicas and their policies,
the `config.JobSpec` every backend runs) runs on the cluster: image, command,
resources, storage, scheduling and clean-up. The
renderers (`render_tfjob`, `render_mpijob`, `render_trainjob`) turn it into a TFJob,
MPIJob or TrainJob; its
`validate()` runs first and rejects, with the bad value and the valid ones,
everything the API server would refuse, silently drop, or accept and then
never run. The smaller records live in `job_parts`, the checks in
`job_validation`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

from kfdist.components.common.errors import require
from kfdist.components.train_distributed.job import config, strategy_rules
from kfdist.components.train_distributed.kubernetes.build import k8s_syntax as k8s
from kfdist.components.train_distributed.kubernetes.build.job_parts import (
    PodExtras, PvcMount, ReplicaOverride, Resources, RunPolicy, Toleration)

#: Replica types of each backend, in rendering order.
REPLICA_TYPES: Dict[str, Tuple[str, ...]] = {
    strategy_rules.TFJOB_BACKEND: ("Chief", "PS", "Worker", "Evaluator"),
    strategy_rules.MPIJOB_BACKEND: ("Launcher", "Worker"),
    strategy_rules.TRAINJOB_BACKEND: ("Chief", "PS", "Worker", "Evaluator", "Launcher"),
}
MPI_IMPLEMENTATIONS = ("OpenMPI", "Intel", "MPICH")
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

    The replicas and their policies are the job's `layout` (the same
    `config.JobSpec` the local backend runs, validated by the same rules);
    the rest says how they run on the cluster.

    Attributes:
      name: Job name: a DNS-1035 label short enough for the operator's pod
        names (`<name>-worker-<i>`, `<name>-launcher`) to stay within 63 characters.
      namespace: Namespace of the job.
      layout: Backend (`tfjob`, `mpijob` or `trainjob`), replicas, restart policy,
        backoff limit, deadline and success policy.
      strategy: The distribution strategy the layout is for.
      image: Image of every replica, with a pinned tag or digest.
      command: Program every replica runs (tfjob; empty: the image entrypoint)
        or every MPI rank runs (mpijob: the launcher wraps it in `mpirun`,
        unless it starts with `mpirun`, `mpiexec` or `horovodrun`).
      args: Arguments after `command`.
      env: Extra environment of every replica.
      env_refs: `env` entries of every replica taken from elsewhere (`valueFrom`, e.g. a
        Secret's key), after `env`.
      resources: Resources of each worker, and of the chief and evaluator
        (the PS, and the chief under `parameter_server`, get them without GPUs).
      overrides: Per replica type (`Chief`, `PS`, `Worker`, `Evaluator`,
        `Launcher`) resources or restart policy.
      mpi_implementation: `OpenMPI` (default), `Intel` or `MPICH` (mpijob).
      ssh_auth_mount_path: Where the MPI Operator mounts the SSH keys
        (mpijob v2beta1; `/home/mpiuser/.ssh` for a non-root image).
      run_policy: Cleanup, time to live and gang scheduling.
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
      extras: Affinity, environment and volumes of every replica, as the KFP task
        gave them (`kubernetes.task_settings`).
    """

    name: str
    namespace: str
    layout: config.JobSpec
    strategy: str
    image: str
    command: Tuple[str, ...] = ()
    args: Tuple[str, ...] = ()
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    env_refs: Tuple[Mapping[str, Any], ...] = ()
    resources: Resources = Resources()
    overrides: Mapping[str, ReplicaOverride] = dataclasses.field(default_factory=dict)
    mpi_implementation: Optional[str] = None
    ssh_auth_mount_path: Optional[str] = None
    run_policy: RunPolicy = RunPolicy()
    node_selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    tolerations: Tuple[Toleration, ...] = ()
    volumes: Tuple[PvcMount, ...] = ()
    service_account: Optional[str] = None
    image_pull_secrets: Tuple[str, ...] = ()
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)
    istio_sidecar: bool = False
    extras: PodExtras = PodExtras()

    @property
    def env_names(self) -> List[str]:
        """The names of every replica's variables: `env`, `env_refs`, then the KFP task's."""
        return list(self.env) + [e["name"] for e in self.env_refs] + self.extras.env_names

    @property
    def backend(self) -> str:
        """`tfjob`, `mpijob` or `trainjob`."""
        return self.layout.backend

    @property
    def success_policy(self) -> Optional[str]:
        """The TFJob's `successPolicy` (None: the operator's default)."""
        if self.backend != strategy_rules.TFJOB_BACKEND:
            return None
        return self.layout.effective_success_policy(self.strategy) or None

    def replica_counts(self) -> Dict[str, int]:
        """Replicas of each present replica type, in rendering order."""
        if self.strategy == strategy_rules.HOROVOD:
            return {"Launcher": 1, "Worker": self.layout.workers}
        counts = self.layout.replica_counts(self.strategy)
        return {rtype: counts[rtype.lower()] for rtype in REPLICA_TYPES[strategy_rules.TFJOB_BACKEND]
                if rtype.lower() in counts}

    def resources_for(self, replica_type: str) -> Resources:
        """Resources of one replica of `replica_type` (overrides first)."""
        override = self.overrides.get(replica_type)
        if override is not None and override.resources is not None:
            return override.resources
        if replica_type == "Launcher":
            return Resources()  # runs mpirun only; GPUs belong on the workers
        if replica_type == "PS" or (replica_type == "Chief"
                                    and self.strategy == strategy_rules.PARAMETER_SERVER):
            return self.resources.without_gpus()
        return self.resources

    def restart_policy_for(self, replica_type: str) -> str:
        """Restart policy of `replica_type` (overrides first)."""
        override = self.overrides.get(replica_type)
        if override is not None and override.restart_policy is not None:
            return override.restart_policy
        return self.layout.restart_policy

    def longest_pod_hostname(self) -> str:
        """The longest pod or service name the operator (or JobSet) derives from `name`."""
        if self.backend == strategy_rules.TRAINJOB_BACKEND:
            from kfdist.components.train_distributed.kubernetes.build import trainjob_runtime

            return max(trainjob_runtime.pod_names(self), key=len)
        names = [f"{self.name}-{rtype.lower()}-{n - 1}" for rtype, n in self.replica_counts().items()
                 if rtype != "Launcher"]
        if self.backend == strategy_rules.MPIJOB_BACKEND:
            names.append(f"{self.name}-launcher")  # the launcher pod's hostname
        return max(names, key=len)

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
