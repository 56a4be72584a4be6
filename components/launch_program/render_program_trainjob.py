"""Renders a `ProgramJob` as a Kubeflow Trainer TrainJob, purely: PyTorch on Trainer's own
`torch-distributed` runtime, TensorFlow on kfdist's `kfdist-tensorflow`.

What Trainer (v2.3, `pkg/runtime/framework/plugins/torch/torch.go`) does with it: one Indexed
Job `node` of `numNodes` pods, the TrainJob's image, command and env in their container `node`,
and, from the torch plugin, exactly `PET_NNODES`, `PET_NPROC_PER_NODE` (`numProcPerNode`),
`PET_NODE_RANK` (the pod's completion index), `PET_MASTER_ADDR` (`<job>-node-0-0.<job>`) and
`PET_MASTER_PORT` (29500). It sets no RANK, WORLD_SIZE or MASTER_ADDR: a program runs there under
`torchrun`, which reads the PET_* variables (as it does in a PyTorchJob, whose operator sets them
too).

On `kfdist-tensorflow` (`manifests/runtimes`), Trainer injects no TF_CONFIG: the replicas run
the program through kfdist's `pod_entry --tf-layout`, which derives the Training Operator's
TF_CONFIG from the pod's JobSet identity, so the image must hold kfdist (its runtime image, or
one built on it; `--program-dir` ships the program into the runtime image). Node 0 is the chief
(else worker 0); the runtime's success and failure policies are the TFJob's.

The KFDIST_* variables (and those the KFP task passed on) go in `trainer.env`; the volumes,
node selector, affinity and tolerations in the pod-customisation field of the installed Trainer
(`runtimePatches`, or v2.1's `podTemplateOverrides`).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

from kfdist.components.common.errors import require
from kfdist.components.launch_program import operator_env, pod_entry, program_pod
from kfdist.components.launch_program.program_job import PYTORCH, TENSORFLOW, ProgramJob
from kfdist.components.train_distributed.kubernetes.build import trainjob_runtime
from kfdist.components.launch_program.program_pod import ProgramPlacement
from kfdist.components.train_distributed.kubernetes.build.job_kinds import (
    COMPLETION_INDEX_LABEL, JOBSET_NAME_LABEL, REPLICATED_JOB_LABEL, TRAINJOB_V1ALPHA1, RenderedJob)
from kfdist.components.train_distributed.kubernetes.build.render_trainjob import (
    POD_CUSTOMISATIONS, POD_TEMPLATE_OVERRIDES, RUNTIME_PATCHES)

#: Trainer's own PyTorch runtime (a ClusterTrainingRuntime every Trainer install ships).
TORCH_RUNTIME = "torch-distributed"
#: kfdist's TensorFlow runtime.
TF_RUNTIME = trainjob_runtime.TF_RUNTIME
#: Its replicated Job and container.
NODE = "node"
#: The restart policy of each runtime's pods, which a TrainJob cannot change: kfdist's TF
#: runtime sets it; Trainer's torch-distributed sets none, so JobSet's webhook defaults it.
RESTART_POLICIES = {PYTORCH: "OnFailure", TENSORFLOW: trainjob_runtime.RESTART_POLICIES[TF_RUNTIME]}
#: The `manager` of kfdist's entry in `runtimePatches`.
PATCH_MANAGER = "kfdist.dev/launch"


def _pod_patch(job: ProgramJob, placement: ProgramPlacement,
               customisation: str) -> Dict[str, Any]:
    """The pod fields Trainer's TrainJob has no field for: the volumes, node selector,
    affinity, tolerations, service account and kfdist's security context (which v2.1's
    `podTemplateOverrides` cannot carry; kfdist's own runtime sets it there)."""
    pod = program_pod.pod_settings(placement)
    node = program_pod.container(job, placement, NODE)
    patched = {k: node[k] for k in ("volumeMounts", "securityContext") if k in node}
    if customisation == POD_TEMPLATE_OVERRIDES:
        pod.pop("securityContext", None)
        patched.pop("securityContext", None)
    if patched:
        pod["containers"] = [{"name": NODE, **patched}]
    return pod


def _tf_command(job: ProgramJob) -> List[str]:
    """The program under `pod_entry --tf-layout` (added to a shipped program's own entry)."""
    layout = json.dumps(operator_env.tensorflow_cluster_counts(job), separators=(",", ":"))
    command = list(job.command)
    if command[1:3] == ["-m", pod_entry.MODULE]:  # a shipped program: one entry, both options
        return ["python", "-m", pod_entry.MODULE, "--tf-layout", layout] + command[3:]
    return pod_entry.entry_command("python", ["--tf-layout", layout], command)


def render_program_trainjob(job: ProgramJob, placement: ProgramPlacement,
                            customisation: str = RUNTIME_PATCHES) -> RenderedJob:
    """Renders `job` as a TrainJob on `torch-distributed` (PyTorch) or `kfdist-tensorflow`.

    Args:
      job: A PyTorch job; validated here.
      placement: Name, namespace, image and PVC.
      customisation: The installed Trainer's pod-customisation field (`POD_CUSTOMISATIONS`).

    Returns:
      The TrainJob, its kind, and the selector of its node-0 pod.

    Raises:
      InvalidInputError: If `job` is invalid, or the name is not a DNS-1035 label.
    """
    job.validate()
    torch = job.framework == PYTORCH
    runtime = TORCH_RUNTIME if torch else TF_RUNTIME
    require(job.restart_policy == RESTART_POLICIES[job.framework],
            f"restart policy {job.restart_policy!r}: a TrainJob's replicas follow its runtime "
            f"{runtime}, whose policy is {RESTART_POLICIES[job.framework]!r}; leave the restart "
            "policy out, or use a TFJob or a PyTorchJob")
    require(job.backoff_limit == trainjob_runtime.BACKOFF_LIMIT,
            f"backoff limit {job.backoff_limit!r}: a TrainJob takes its runtime {runtime}'s "
            f"({trainjob_runtime.BACKOFF_LIMIT}); leave it out, or use a TFJob or a PyTorchJob")
    require(customisation in POD_CUSTOMISATIONS, f"unknown pod customisation field "
            f"{customisation!r}; valid: {list(POD_CUSTOMISATIONS)}")
    placement.validate()
    trainer: Dict[str, Any] = {
        "image": placement.image,
        "command": program_pod.command(job, placement) if torch else _tf_command(job),
        "numNodes": job.workers if torch else job.replica_count}
    if torch:
        trainer["numProcPerNode"] = job.procs_per_worker
    trainer["env"] = program_pod.env(job, placement)
    spec: Dict[str, Any] = {
        "runtimeRef": {"apiGroup": TRAINJOB_V1ALPHA1.group, "kind": "ClusterTrainingRuntime",
                       "name": runtime},
        "trainer": trainer}
    if job.active_deadline_seconds is not None:
        require(customisation == RUNTIME_PATCHES, "--timeout needs Trainer v2.2 or later on a "
                "TrainJob (v2.1 has no activeDeadlineSeconds)")
        spec["activeDeadlineSeconds"] = int(job.active_deadline_seconds)
    resources = program_pod.container(job, placement, NODE).get("resources")
    if resources:
        trainer["resourcesPerNode"] = resources
    patch = _pod_patch(job, placement, customisation)
    if patch:
        if customisation == POD_TEMPLATE_OVERRIDES:
            spec[customisation] = [dict(targetJobs=[{"name": NODE}], spec=patch)]
        else:
            spec[customisation] = [{"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {
                "spec": {"replicatedJobs": [{"name": NODE, "template": {"spec": {
                    "template": {"spec": patch}}}}]}}}}]
    body = program_pod.body(TRAINJOB_V1ALPHA1, placement, spec)
    selector = {JOBSET_NAME_LABEL: placement.name, REPLICATED_JOB_LABEL: NODE,
                COMPLETION_INDEX_LABEL: "0"}
    return RenderedJob(TRAINJOB_V1ALPHA1, placement.name, placement.namespace, body, selector)
