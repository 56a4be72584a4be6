"""Renders a TensorFlow `ProgramJob` as a Training Operator TFJob (`kubeflow.org/v1`), purely.

Replica types `Chief`, `Worker`, `PS`, `Evaluator` as the layout asks; the
operator (v1.9) injects TF_CONFIG into the container named `tensorflow`,
addressing the replicas by the port named `tfjob-port`, exactly the layout
`launch --backend local` gives on localhost (`operator_env`). The job
succeeds when the chief (worker 0 without one) succeeds.
"""

from __future__ import annotations

from typing import Any, Dict

from kfdist.components.common.errors import require
from kfdist.components.launch_program import operator_env, program_pod
from kfdist.components.launch_program.program_job import TENSORFLOW, ProgramJob
from kfdist.components.launch_program.program_pod import ProgramPlacement
from kfdist.components.train_distributed.kubernetes.build.job_kinds import (
    JOB_NAME_LABEL, REPLICA_INDEX_LABEL, REPLICA_TYPE_LABEL, TFJOB_V1, RenderedJob)
from kfdist.components.train_distributed.kubernetes.build.render_tfjob import (
    TF_CONTAINER_NAME, TF_PORT, TF_PORT_NAME)

#: The TFJob replica type of each TF_CONFIG task type.
TFJOB_REPLICA_TYPES = {"chief": "Chief", "worker": "Worker", "ps": "PS", "evaluator": "Evaluator"}


def render_program_tfjob(job: ProgramJob, placement: ProgramPlacement) -> RenderedJob:
    """Renders `job` as a TFJob.

    Args:
      job: A TensorFlow job; validated here.
      placement: Name, namespace and image.

    Returns:
      The TFJob, its kind, and the selector of its chief (or worker 0) pod.

    Raises:
      InvalidInputError: If `job` is invalid, not TensorFlow, or the name is not a DNS-1035 label.
    """
    job.validate()
    require(job.framework == TENSORFLOW,
            f"a TFJob runs framework 'tensorflow', got {job.framework!r}")
    placement.validate()
    replica_specs: Dict[str, Any] = {}
    for task_type, replicas in operator_env.tensorflow_cluster_counts(job).items():
        container = program_pod.container(job, placement, TF_CONTAINER_NAME, TF_PORT_NAME,
                                          TF_PORT, gpus=task_type != "ps")  # PS: variables only
        replica_specs[TFJOB_REPLICA_TYPES[task_type]] = {
            "replicas": replicas, "restartPolicy": job.restart_policy,
            "template": {"spec": program_pod.pod_spec(container, placement)}}
    body = program_pod.body(TFJOB_V1, placement, {"runPolicy": program_pod.run_policy(job),
                                                  "tfReplicaSpecs": replica_specs})
    leader = "chief" if job.chief else "worker"
    selector = {JOB_NAME_LABEL: placement.name, REPLICA_TYPE_LABEL: leader, REPLICA_INDEX_LABEL: "0"}
    return RenderedJob(TFJOB_V1, placement.name, placement.namespace, body, selector)
