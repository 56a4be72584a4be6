"""Renders a `ClusterJobSpec` as a Kubeflow Trainer TrainJob (`trainer.kubeflow.org/v1alpha1`).

What Trainer (v2.3, with JobSet v0.12) does with it:

* `spec.runtimeRef` names kfdist's ClusterTrainingRuntime (`trainjob_runtime`);
  Trainer copies the runtime's JobSet template into a JobSet of the TrainJob's
  name, owned by it, and puts `spec.trainer` (image, command, args, env,
  `resourcesPerNode`) into the container `node` of the runtime's trainer Job:
  `node` for TensorFlow (`numNodes` pods), `launcher` for Horovod (whose
  `numNodes` counts the launcher, a node too, and `numProcPerNode` MPI slots).
* Pods are `<name>-<job>-0-<i>-<random>`, hosts `<name>-<job>-0-<i>.<name>`,
  labelled `jobset.sigs.k8s.io/jobset-name: <name>`, `.../replicatedjob-name`,
  and `batch.kubernetes.io/job-completion-index`. The TrainJob's own labels
  reach neither the JobSet nor the pods: the run labels and the pod settings
  (node selector, affinity, tolerations, service account, volumes, pull
  secrets, Istio annotation) travel in the pod-customisation field of the
  installed version: `runtimePatches` (v2.2, v2.3) or `podTemplateOverrides`
  (v2.1); the environment in `trainer.env` (Trainer refuses env patches).
* Conditions: `Suspended` (reason `Suspended`/`Resumed`), and `Complete` or
  `Failed` copied from the JobSet (`AllJobsCompleted`, `FailedJobs` with
  "(first failed job: <job>)"), or `Failed`/`DeadlineExceeded` after
  `activeDeadlineSeconds`. No Created or Running.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List

from kfdist.components.common.errors import InvalidInputError, require
from kfdist.components.train_distributed.job import strategy_rules
from kfdist.components.train_distributed.kubernetes.build import trainjob_runtime as runtimes
from kfdist.components.train_distributed.kubernetes.build.job_kinds import (
    COMPLETION_INDEX_LABEL, JOBSET_NAME_LABEL, REPLICATED_JOB_LABEL, TRAINJOB_V1ALPHA1, RenderedJob)
from kfdist.components.train_distributed.kubernetes.build.job_spec import ClusterJobSpec
from kfdist.components.train_distributed.kubernetes.build.pod_template import (
    container_env, job_metadata, pod_template, render_resources)

#: Pod-customisation fields, newest first: each names the Trainer releases that have it.
RUNTIME_PATCHES = "runtimePatches"            # v2.2 and later
POD_TEMPLATE_OVERRIDES = "podTemplateOverrides"  # v2.1
POD_CUSTOMISATIONS = (RUNTIME_PATCHES, POD_TEMPLATE_OVERRIDES)
#: The field of each supported Trainer release (v2.0's `podSpecOverrides` is not supported).
CUSTOMISATION_BY_RELEASE = {"2.1": POD_TEMPLATE_OVERRIDES, "2.2": RUNTIME_PATCHES,
                            "2.3": RUNTIME_PATCHES}
#: The `manager` of kfdist's entry in `runtimePatches` (a domain-prefixed path).
PATCH_MANAGER = "kfdist.dev/train-distributed"


def customisation_from_schema(schema: Dict[str, Any]) -> str:
    """The pod-customisation field of the Trainer whose TrainJob CRD has this `openAPIV3Schema`.

    Raises:
      InvalidInputError: For Trainer v2.0 (`podSpecOverrides`) or an unknown TrainJob.
    """
    fields = set(((schema.get("properties") or {}).get("spec") or {}).get("properties") or {})
    for field in POD_CUSTOMISATIONS:
        if field in fields:
            return field
    version = "v2.0 (podSpecOverrides)" if "podSpecOverrides" in fields else "unknown"
    raise InvalidInputError(
        f"the cluster's Kubeflow Trainer is {version}: kfdist's TrainJobs need Trainer v2.1 or "
        f"later (one of {list(POD_CUSTOMISATIONS)}); upgrade Trainer, or use backend tfjob/mpijob")


def trainjob_log_pod_selector(spec: ClusterJobSpec) -> Dict[str, str]:
    """Labels of the pod whose log tells the story: node 0 (the chief), or the MPI launcher."""
    if spec.strategy == strategy_rules.HOROVOD:
        return {JOBSET_NAME_LABEL: spec.name, REPLICATED_JOB_LABEL: "launcher"}
    return {JOBSET_NAME_LABEL: spec.name, REPLICATED_JOB_LABEL: "node", COMPLETION_INDEX_LABEL: "0"}


def _pod_settings(spec: ClusterJobSpec) -> Dict[str, Any]:
    """The pod template the step would give every replica, reduced to what a TrainJob may patch."""
    template = pod_template(spec, "Worker", runtimes.NODE_CONTAINER,
                            service_account=spec.service_account)
    pod = template["spec"]
    # Trainer v2.1's podTemplateOverrides has no securityContext: kfdist's runtimes set it.
    pod.pop("securityContext", None)
    container = pod.pop("containers")[0]
    if container.get("volumeMounts"):
        pod["containers"] = [{"name": runtimes.NODE_CONTAINER,
                              "volumeMounts": container["volumeMounts"]}]
    settings: Dict[str, Any] = {}
    if template.get("metadata"):
        settings["metadata"] = template["metadata"]
    if pod:
        settings["spec"] = pod
    return settings


def _customisation(spec: ClusterJobSpec, field: str) -> List[Dict[str, Any]]:
    settings = _pod_settings(spec)
    if not settings:
        return []
    jobs = runtimes.REPLICATED_JOBS[runtimes.runtime_for(spec.strategy)]
    if field == POD_TEMPLATE_OVERRIDES:
        return [dict(targetJobs=[{"name": job} for job in jobs], **settings)]
    replicated = [{"name": job, "template": {"spec": {"template": copy.deepcopy(settings)}}}
                  for job in jobs]
    return [{"manager": PATCH_MANAGER,
             "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": replicated}}}}]


def _trainer(spec: ClusterJobSpec) -> Dict[str, Any]:
    trainer: Dict[str, Any] = {"image": spec.image, "command": list(spec.command)}
    if spec.strategy == strategy_rules.HOROVOD:
        from kfdist.components.train_distributed.kubernetes.build.render_mpijob import mpirun_command

        trainer["command"] = mpirun_command(spec)
    if spec.args:
        trainer["args"] = list(spec.args)
    trainer["numNodes"] = runtimes.node_count(spec)
    if spec.strategy == strategy_rules.HOROVOD:
        trainer["numProcPerNode"] = spec.layout.slots_per_worker
    resources = render_resources(spec.resources_for("Worker"))
    if resources:
        trainer["resourcesPerNode"] = resources
    env = container_env(spec)
    if env:
        trainer["env"] = env
    return trainer


def render_trainjob(spec: ClusterJobSpec, customisation: str = RUNTIME_PATCHES) -> RenderedJob:
    """Renders `spec` as a TrainJob on kfdist's runtime for its strategy.

    Args:
      spec: A job with backend `trainjob`; validated here.
      customisation: The installed Trainer's pod-customisation field
        (`POD_CUSTOMISATIONS`; see `kube_api.trainer_customisation`).

    Returns:
      The TrainJob, its kind, and the selector of its node-0 (or launcher) pod.

    Raises:
      InvalidInputError: If `spec` is invalid, not a trainjob, or needs what
        the runtime or `customisation` cannot carry.
    """
    spec.validate()
    require(spec.backend == strategy_rules.TRAINJOB_BACKEND,
            f"render_trainjob needs backend 'trainjob', got {spec.backend!r}")
    require(customisation in POD_CUSTOMISATIONS, f"unknown pod customisation field "
            f"{customisation!r}; valid: {list(POD_CUSTOMISATIONS)} (Trainer v2.2+, v2.1)")
    body_spec: Dict[str, Any] = {
        "runtimeRef": {"apiGroup": TRAINJOB_V1ALPHA1.group, "kind": "ClusterTrainingRuntime",
                       "name": runtimes.runtime_for(spec.strategy)},
        "trainer": _trainer(spec),
    }
    deadline = spec.layout.active_deadline_seconds
    if deadline is not None:
        require(customisation == RUNTIME_PATCHES, "active_deadline_seconds needs Trainer v2.2 or "
                "later (a v2.1 TrainJob has no activeDeadlineSeconds); use timeout_seconds")
        body_spec["activeDeadlineSeconds"] = int(deadline)
    patches = _customisation(spec, customisation)
    if patches:
        body_spec[customisation] = patches
    body = {"apiVersion": TRAINJOB_V1ALPHA1.api_version, "kind": TRAINJOB_V1ALPHA1.kind,
            "metadata": job_metadata(spec), "spec": body_spec}
    return RenderedJob(kind=TRAINJOB_V1ALPHA1, name=spec.name, namespace=spec.namespace,
                       body=body, log_pod_selector=trainjob_log_pod_selector(spec))
