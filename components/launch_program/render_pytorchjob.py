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

import copy
from typing import Any, Dict

from kfdist.components.common.errors import require
from kfdist.components.launch_program import program_pod
from kfdist.components.launch_program.program_job import PYTORCH, ProgramJob
from kfdist.components.launch_program.program_pod import ProgramPlacement
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
    placement.validate()
    container = program_pod.container(job, placement, PYTORCH_CONTAINER_NAME, PYTORCH_PORT_NAME,
                                      PYTORCH_PORT)
    replica_specs: Dict[str, Any] = {}
    for replica_type, replicas in (("Master", 1), ("Worker", job.workers - 1)):
        if replicas:
            replica_specs[replica_type] = {
                "replicas": replicas, "restartPolicy": job.restart_policy,
                "template": {"spec": program_pod.pod_spec(copy.deepcopy(container), placement)}}
    body = program_pod.body(PYTORCHJOB_V1, placement, {
        "runPolicy": program_pod.run_policy(job), "nprocPerNode": str(job.procs_per_worker),
        "pytorchReplicaSpecs": replica_specs})
    selector = {JOB_NAME_LABEL: placement.name, REPLICA_TYPE_LABEL: "master",
                REPLICA_INDEX_LABEL: "0"}
    return RenderedJob(PYTORCHJOB_V1, placement.name, placement.namespace, body, selector)
