"""Renders a PyTorch `ProgramJob` as a Training Operator PyTorchJob (`kubeflow.org/v1`), purely.

What the operator (v1.9) does with it: replica types `Master` (one) and
`Worker` (`workers - 1`); pods `<job>-master-0`, `<job>-worker-i`, each with
a Service of its name; into the container named `pytorch` it injects
MASTER_ADDR (the master's Service), MASTER_PORT (the container port named
`pytorchjob-port`), WORLD_SIZE (replicas x `nprocPerNode`), RANK and the
PET_* variables (`operator_env.pytorch_env`); the job succeeds when the
master succeeds. `runPolicy` holds backoffLimit and activeDeadlineSeconds.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict

from kfdist.components.common.errors import require
from kfdist.components.launch_program import operator_env
from kfdist.components.launch_program.program_job import PYTORCH, ProgramJob
from kfdist.components.train_distributed.kubernetes.build import k8s_syntax as k8s
from kfdist.components.train_distributed.kubernetes.build.job_kinds import (
    JOB_NAME_LABEL, REPLICA_INDEX_LABEL, REPLICA_TYPE_LABEL, TRAINING_OPERATOR_INSTALL, JobKind,
    RenderedJob)

PYTORCHJOB_V1 = JobKind("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs",
                        "Kubeflow Training Operator", TRAINING_OPERATOR_INSTALL)
#: The container the Training Operator injects the PyTorch variables into.
PYTORCH_CONTAINER_NAME = "pytorch"
#: The port the operator reads for MASTER_PORT (its default, 23456).
PYTORCH_PORT_NAME = "pytorchjob-port"
PYTORCH_PORT = 23456


@dataclasses.dataclass(frozen=True)
class ProgramPlacement:
    """Where a program job runs on a cluster.

    Attributes:
      name: The job's name (a DNS-1035 label).
      namespace: Its namespace.
      image: The image holding the program (the user's, or kfdist's runtime).
    """

    name: str
    namespace: str
    image: str


def render_pytorchjob(job: ProgramJob, placement: ProgramPlacement) -> RenderedJob:
    """Renders `job` as a PyTorchJob.

    Args:
      job: A PyTorch job; validated here.
      placement: Name, namespace and image.

    Returns:
      The PyTorchJob, its kind, and the selector of its master pod.

    Raises:
      InvalidInputError: If `job` is invalid, not PyTorch, or the name is not a DNS-1035 label.
    """
    job.validate()
    require(job.framework == PYTORCH, f"a PyTorchJob runs framework 'pytorch', got {job.framework!r}")
    require(k8s.is_dns1035_label(placement.name),
            f"job name {placement.name!r} is not a DNS-1035 label (lower-case letters, digits, '-')")
    container = {
        "name": PYTORCH_CONTAINER_NAME, "image": placement.image, "command": list(job.command),
        "env": [{"name": k, "value": v} for k, v in operator_env.kfdist_env(job).items()],
        "ports": [{"name": PYTORCH_PORT_NAME, "containerPort": PYTORCH_PORT, "protocol": "TCP"}],
    }
    replica_specs: Dict[str, Any] = {}
    for replica_type, replicas in (("Master", 1), ("Worker", job.workers - 1)):
        if replicas:
            replica_specs[replica_type] = {
                "replicas": replicas, "restartPolicy": job.restart_policy,
                "template": {"spec": {"containers": [container]}}}
    run_policy: Dict[str, Any] = {"cleanPodPolicy": "Running"}
    if job.backoff_limit is not None:
        run_policy["backoffLimit"] = job.backoff_limit
    if job.active_deadline_seconds is not None:
        run_policy["activeDeadlineSeconds"] = int(job.active_deadline_seconds)
    body = {"apiVersion": PYTORCHJOB_V1.api_version, "kind": PYTORCHJOB_V1.kind,
            "metadata": {"name": placement.name, "namespace": placement.namespace},
            "spec": {"runPolicy": run_policy, "nprocPerNode": str(job.procs_per_worker),
                     "pytorchReplicaSpecs": replica_specs}}
    selector = {JOB_NAME_LABEL: placement.name, REPLICA_TYPE_LABEL: "master",
                REPLICA_INDEX_LABEL: "0"}
    return RenderedJob(PYTORCHJOB_V1, placement.name, placement.namespace, body, selector)
