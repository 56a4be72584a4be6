"""Renders a `ClusterJobSpec` as a Kubeflow Training Operator TFJob (`kubeflow.org/v1`).

What the operator (v1.9) does with it, and why the object looks as it does:

* Replica types `Chief`, `PS`, `Worker`, `Evaluator`; one pod per replica,
  named `<job>-<type lower-case>-<index>`, plus one headless Service of the
  same name per pod. Each pod is labelled `training.kubeflow.org/job-name`,
  `.../replica-type` (lower-case), `.../replica-index`, `.../operator-name:
  tfjob-controller`, and the chief (worker 0 without a chief) also
  `.../job-role: master`.
* TF_CONFIG is injected only into the container named `tensorflow` (its
  webhook rejects a replica without one); the cluster addresses use that
  container's port named `tfjob-port` (2222 by default).
* `restartPolicy` is per replica spec (the operator overwrites the pod's);
  `ExitCode` recreates pods whose exit code is retryable (>= 128: killed by
  a signal, e.g. 137 OOMKilled or preempted) and fails the job on others.
* `runPolicy` holds cleanPodPolicy, ttlSecondsAfterFinished,
  activeDeadlineSeconds, backoffLimit and schedulingPolicy: written at the
  spec root they are silently pruned.
* Conditions: `Created`, `Running`, `Restarting`, `Succeeded`, `Failed`
  (`Suspended`); on failure the `Failed` condition's reason is `TFJobFailed`
  and its message says which replica type failed, e.g. "TFJob ns/name has
  failed because 1 Worker replica(s) failed.", or that the backoff limit or
  the deadline was exceeded; the pods' own reasons (OOMKilled, exit codes)
  are in the pods' statuses.
"""

from __future__ import annotations

from typing import Any, Dict

from kfdist.components.common.errors import require
from kfdist.components.train_distributed.kubernetes.build.job_kinds import (
    JOB_NAME_LABEL, REPLICA_INDEX_LABEL, REPLICA_TYPE_LABEL, TFJOB_V1, RenderedJob)
from kfdist.components.train_distributed.job import strategy_rules
from kfdist.components.train_distributed.kubernetes.build.job_spec import ClusterJobSpec
from kfdist.components.train_distributed.kubernetes.build.pod_template import (
    job_metadata, pod_template, render_run_policy)

#: The container the Training Operator injects TF_CONFIG into.
TF_CONTAINER_NAME = "tensorflow"
#: The port the operator reads to build TF_CONFIG and the replicas' Services.
TF_PORT_NAME = "tfjob-port"
TF_PORT = 2222


def tfjob_log_pod_selector(spec: ClusterJobSpec) -> Dict[str, str]:
    """Labels of the pod whose log tells the job's story: the chief, else worker 0."""
    replica_type = "chief" if "Chief" in spec.replica_counts() else "worker"
    return {JOB_NAME_LABEL: spec.name, REPLICA_TYPE_LABEL: replica_type, REPLICA_INDEX_LABEL: "0"}


def render_tfjob(spec: ClusterJobSpec) -> RenderedJob:
    """Renders `spec` as a TFJob.

    Args:
      spec: A job with backend `tfjob`; validated here.

    Returns:
      The TFJob, its kind, and the selector of its chief (or worker 0) pod.

    Raises:
      InvalidInputError: If `spec` is invalid or not a tfjob.
    """
    spec.validate()
    require(spec.backend == strategy_rules.TFJOB_BACKEND, f"render_tfjob needs backend 'tfjob', got {spec.backend!r}")
    ports = ({"name": TF_PORT_NAME, "containerPort": TF_PORT, "protocol": "TCP"},)
    replica_specs: Dict[str, Any] = {}
    for replica_type, replicas in spec.replica_counts().items():
        replica_specs[replica_type] = {
            "replicas": replicas,
            "restartPolicy": spec.restart_policy_for(replica_type),
            "template": pod_template(spec, replica_type, TF_CONTAINER_NAME,
                                     command=spec.command, args=spec.args, ports=ports,
                                     service_account=spec.service_account),
        }
    body_spec: Dict[str, Any] = {
        "runPolicy": render_run_policy(spec),
        "tfReplicaSpecs": replica_specs,
    }
    if spec.success_policy is not None:
        body_spec["successPolicy"] = spec.success_policy
    body = {
        "apiVersion": TFJOB_V1.api_version,
        "kind": TFJOB_V1.kind,
        "metadata": job_metadata(spec),
        "spec": body_spec,
    }
    return RenderedJob(kind=TFJOB_V1, name=spec.name, namespace=spec.namespace, body=body,
                       log_pod_selector=tfjob_log_pod_selector(spec))
