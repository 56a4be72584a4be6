"""What Kubeflow Trainer v2.3, JobSet v0.12 and the batch/v1 Job controller decide (pure functions).

Transcribed from the Go sources (kubeflow/trainer@v2.3.0, kubernetes-sigs/jobset@v0.12.0):

* Trainer (pkg/runtime/core/trainingruntime.go, framework/plugins/{jobset,plainml,mpi,torch}):
  the JobSet copies the runtime's template, with `runtimePatches` (v2.2+) or
  `podTemplateOverrides` (v2.1) merged into the named replicated Jobs'
  pods; jobs labelled `trainjob-ancestor-step: trainer` get `replicas: 1`
  and, in their container `node`, the TrainJob's image, command, args and
  env; the torch plugin (`torch.go`) adds PET_NNODES, PET_NPROC_PER_NODE
  (`numProcPerNode`, else "auto": 1 without GPUs or CPUs), PET_NODE_RANK (the
  completion index annotation), PET_MASTER_ADDR (`<job>-node-0-0.<job>`) and
  PET_MASTER_PORT (29500), and the port; `numNodes` sets parallelism = completions of the first such job
  (plain policy) or of the job `node` (mpi policy, one less when the
  launcher is a node); `resourcesPerNode` only applies with an mlPolicy.
  A TrainJob whose ClusterTrainingRuntime does not exist is refused by its
  validating webhook. Conditions: `Suspended` (Suspended/Resumed), and
  `Complete`/`Failed` copied from the JobSet; `DeadlineExceeded` is Trainer's own.
* JobSet: Jobs `<jobset>-<rjob>-<i>`, pods hosted `<job>-<index>` under the
  subdomain `<jobset>`; Completed `AllJobsCompleted` when the success policy
  holds; with no failure policy the first failed Job fails the set:
  `FailedJobs`, "... (first failed job: <job>)".
* Job: `podFailurePolicy` rules (FailJob/Ignore/Count on exit codes or pod
  conditions), `backoffLimit` over failed pods (and, `OnFailure`, container
  restarts), `successPolicy.rules[].succeededIndexes`.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Dict, Iterable, List, Optional, Tuple

ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
NODE_CONTAINER = "node"
WEBHOOK = "validator.trainjob.trainer.kubeflow.org"
SUSPENDED = ("Suspended", "TrainJob is suspended")
RESUMED = ("Resumed", "TrainJob is resumed")
DEADLINE_EXCEEDED = ("DeadlineExceeded", "TrainJob exceeded its active deadline")
JOBSET_COMPLETED = ("AllJobsCompleted", "jobset completed successfully")
JOB_BACKOFF_EXCEEDED = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
FAIL_JOB, IGNORE, COUNT = "FailJob", "Ignore", "Count"


def runtime_missing(trainjob: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The webhook's refusal of a TrainJob whose ClusterTrainingRuntime is missing (a `Status`)."""
    ref = dict(trainjob["spec"]["runtimeRef"])
    name = ref["name"]
    shown = json.dumps({"name": name, "apiGroup": ref.get("apiGroup", "trainer.kubeflow.org"),
                        "kind": ref.get("kind", "ClusterTrainingRuntime")}, separators=(",", ":"))
    message = (f'admission webhook "{WEBHOOK}" denied the request: spec.RuntimeRef: Invalid value: '
               f'{shown}: clustertrainingruntimes.trainer.kubeflow.org "{name}" not found: '
               "specified clusterTrainingRuntime must be created before the TrainJob is created")
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": "Forbidden", "code": 403}


def jobset_failed(first_failed_job: str) -> Tuple[str, str]:
    return ("FailedJobs", "jobset failed due to one or more job failures "
                          f"(first failed job: {first_failed_job})")


def job_failed_by_rule(container: str, namespace: str, pod: str, code: int, index: int) -> Tuple[str, str]:
    return ("PodFailurePolicy", f"Container {container} for pod {namespace}/{pod} failed with exit "
                                f"code {code} matching FailJob rule at index {index}")


# ---- the JobSet Trainer builds -------------------------------------------------------------

def _merge_named(base: List[Dict[str, Any]], patch: Iterable[Dict[str, Any]], key: str = "name"):
    by_key = {item[key]: item for item in base}
    for item in patch:
        if item[key] in by_key:
            _merge_pod_level(by_key[item[key]], item)
        else:
            base.append(copy.deepcopy(item))
            by_key[item[key]] = base[-1]


def _merge_pod_level(target: Dict[str, Any], patch: Dict[str, Any]) -> None:
    """A strategic merge of the fields kfdist patches: maps merge, named lists merge by name."""
    for field, value in patch.items():
        if field in ("containers", "initContainers", "volumes", "imagePullSecrets", "env"):
            _merge_named(target.setdefault(field, []), value)
        elif field == "volumeMounts":
            _merge_named(target.setdefault(field, []), value, key="mountPath")
        elif isinstance(value, dict) and field not in ("affinity",):
            _merge_pod_level(target.setdefault(field, {}), value)
        else:
            target[field] = copy.deepcopy(value)


def _patches_by_job(trainjob: Dict[str, Any]) -> Dict[str, List[Dict[str, Any]]]:
    """Pod-template patches per replicated Job, from runtimePatches or podTemplateOverrides."""
    spec, patches = trainjob["spec"], {}
    for entry in spec.get("runtimePatches") or []:
        jobset = ((entry.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}
        for job in jobset.get("replicatedJobs") or []:
            pod = ((job.get("template") or {}).get("spec") or {}).get("template") or {}
            patches.setdefault(job["name"], []).append(pod)
    for entry in spec.get("podTemplateOverrides") or []:
        pod = {k: v for k, v in entry.items() if k in ("metadata", "spec")}
        for target in entry["targetJobs"]:
            patches.setdefault(target["name"], []).append(pod)
    return patches


def _upsert_env(container: Dict[str, Any], env: Iterable[Dict[str, Any]]) -> None:
    _merge_named(container.setdefault("env", []), env)


def _count(trainjob: Dict[str, Any], runtime: Dict[str, Any], job: Dict[str, Any],
           first_trainer_job: Optional[str]) -> int:
    policy, trainer = runtime["spec"].get("mlPolicy"), trainjob["spec"].get("trainer") or {}
    count = job["template"]["spec"].get("parallelism") or 1
    mpi = (policy or {}).get("mpi")
    if policy is not None and (job["template"].get("metadata") or {}).get("labels", {}).get(
            ANCESTOR_LABEL) == "trainer":
        count = policy.get("numNodes") or 1
    nodes = trainer.get("numNodes") or (policy or {}).get("numNodes") or 1
    if mpi is not None and job["name"] == "node":
        count = max(nodes - 1, 1) if mpi.get("runLauncherAsNode") else nodes
    elif mpi is None and job["name"] == first_trainer_job:
        count = nodes
    return max(count, 1)


def jobset_spec(trainjob: Dict[str, Any], runtime: Dict[str, Any]) -> Dict[str, Any]:
    """The JobSet spec Trainer applies for `trainjob` on `runtime` (before JobSet's defaults)."""
    spec = copy.deepcopy(runtime["spec"]["template"]["spec"])
    trainer = trainjob["spec"].get("trainer") or {}
    policy = runtime["spec"].get("mlPolicy")
    mpi = (policy or {}).get("mpi")
    patches = _patches_by_job(trainjob)
    is_trainer = {j["name"]: (j["template"].get("metadata") or {}).get("labels", {}).get(
        ANCESTOR_LABEL) == "trainer" for j in spec["replicatedJobs"]}
    first_trainer = next((n for n, t in is_trainer.items() if t), None)
    for job in spec["replicatedJobs"]:
        pod = job["template"]["spec"]["template"]
        for patch in patches.get(job["name"], []):
            _merge_pod_level(pod, patch)
        count = _count(trainjob, runtime, job, first_trainer)
        job["template"]["spec"]["parallelism"] = job["template"]["spec"]["completions"] = count
        node = next((c for c in pod["spec"]["containers"] if c["name"] == NODE_CONTAINER), None)
        launcher_node = bool(mpi and mpi.get("runLauncherAsNode") and job["name"] == "node")
        if node is None or not (is_trainer[job["name"]] or launcher_node):
            continue
        if is_trainer[job["name"]]:
            job["replicas"] = 1
            for field in ("image", "command", "args"):
                if field in trainer:
                    node[field] = copy.deepcopy(trainer[field])
        _upsert_env(node, trainer.get("env") or [])
        if (policy or {}).get("torch") is not None and is_trainer[job["name"]]:
            _upsert_env(node, torch_env(trainjob, count))
            _merge_named(node.setdefault("ports", []), [{"containerPort": TORCH_PORT}],
                         key="containerPort")
        if policy is not None and trainer.get("resourcesPerNode"):
            _merge_pod_level(node.setdefault("resources", {}), trainer["resourcesPerNode"])
    return spec


#: `constants.ContainerTrainerPort`: the torch plugin's master port.
TORCH_PORT = 29500


def torch_env(trainjob: Dict[str, Any], nodes: int) -> List[Dict[str, Any]]:
    """The torch plugin's PET_* variables (`EnforceMLPolicy`; no GPUs or CPUs asked here, so
    "auto" processes per node is 1)."""
    name = trainjob["metadata"]["name"]
    per_node = (trainjob["spec"].get("trainer") or {}).get("numProcPerNode")
    return [{"name": "PET_NNODES", "value": str(nodes)},
            {"name": "PET_NPROC_PER_NODE", "value": str(per_node if per_node is not None else 1)},
            {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {
                "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
            {"name": "PET_MASTER_ADDR", "value": f"{name}-node-0-0.{name}"},
            {"name": "PET_MASTER_PORT", "value": str(TORCH_PORT)}]


def mpi_slots(trainjob: Dict[str, Any], runtime: Dict[str, Any]) -> int:
    """Slots per host in the hostfile (`trainer.numProcPerNode`, else the runtime's)."""
    mpi = runtime["spec"]["mlPolicy"]["mpi"]
    return int((trainjob["spec"].get("trainer") or {}).get("numProcPerNode")
               or mpi.get("numProcPerNode") or 1)


# ---- Jobs ----------------------------------------------------------------------------------

def _index_set(text: str) -> set:
    indexes = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        indexes.update(range(int(low), int(high or low) + 1))
    return indexes


def success_policy_met(job_spec: Dict[str, Any], succeeded: set) -> bool:
    """Whether a Job's `successPolicy` holds for these succeeded indexes (no policy: all of them)."""
    rules = (job_spec.get("successPolicy") or {}).get("rules")
    if not rules:
        return succeeded >= set(range(job_spec.get("completions") or 1))
    for rule in rules:
        wanted = _index_set(rule["succeededIndexes"]) if "succeededIndexes" in rule else None
        done = succeeded & wanted if wanted is not None else succeeded
        count = rule.get("succeededCount", len(wanted) if wanted is not None else 1)
        if (wanted is None or done == wanted or "succeededCount" in rule) and len(done) >= count:
            return True
    return False


def pod_exit_action(job_spec: Dict[str, Any], container: str, code: int) -> str:
    """What a Job's `podFailurePolicy` does with a pod whose container exited with `code`."""
    for rule in (job_spec.get("podFailurePolicy") or {}).get("rules") or []:
        on = rule.get("onExitCodes")
        if on is None or on.get("containerName", container) != container:
            continue
        listed = code in on["values"]
        if listed == (on["operator"] == "In"):
            return rule["action"]
    return COUNT
