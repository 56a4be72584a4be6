"""Pod and job objects shaped like the ones the operators, Trainer, JobSet and the kubelet write."""

from __future__ import annotations

import copy
import random
import string
from typing import Any, Dict, Iterator, List, Tuple

from kfdist.components.train_distributed.kubernetes.build.job_kinds import (
    COMPLETION_INDEX_LABEL, JOB_NAME_LABEL, JOB_ROLE_LABEL, JOBSET_NAME_LABEL, REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL, REPLICATED_JOB_LABEL)
from fakes.kube_server.store import ObjectKey, now_rfc3339

OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
JOBSETS = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
JOBS = ("batch", "v1", "jobs")
PODS = ("", "v1", "pods")
#: The one replicated Job of kfdist's runtimes whose pods run `spec.trainer` (its container too).
NODE = "node"


def _owner(obj: Dict[str, Any]) -> Dict[str, Any]:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def for_job(job_key: ObjectKey, job: Dict[str, Any]) -> Iterator[Tuple[ObjectKey, Dict[str, Any]]]:
    """The pods an operator creates: TFJob Chief/PS/Worker/Evaluator, MPIJob Launcher/Worker."""
    name, namespace = job_key[4], job_key[3]
    spec = job["spec"]
    mpi = job["kind"] == "MPIJob"
    replica_specs = spec["mpiReplicaSpecs" if mpi else "tfReplicaSpecs"]
    owner = _owner(job)
    for rtype, replica_spec in replica_specs.items():
        for index in range(int(replica_spec.get("replicas", 1))):
            labels = {JOB_NAME_LABEL: name}
            if mpi:
                labels.update({OPERATOR_NAME_LABEL: "mpi-operator", JOB_ROLE_LABEL: rtype.lower()})
                if rtype == "Launcher":  # created through a batch Job: random suffix
                    pod_name = f"{name}-launcher-" + "".join(random.choices(string.ascii_lowercase, k=5))
                else:
                    labels[REPLICA_INDEX_LABEL] = str(index)
                    pod_name = f"{name}-worker-{index}"
            else:
                labels.update({OPERATOR_NAME_LABEL: "tfjob-controller",
                               REPLICA_TYPE_LABEL: rtype.lower(), REPLICA_INDEX_LABEL: str(index)})
                if rtype == "Chief":
                    labels[JOB_ROLE_LABEL] = "master"
                pod_name = f"{name}-{rtype.lower()}-{index}"
            template = copy.deepcopy(replica_spec["template"])
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": pod_name, "namespace": namespace, "labels": labels,
                                "ownerReferences": [owner],
                                "annotations": {"kfdist.test/replica-type": rtype}},
                   "spec": template["spec"],
                   "status": pending_status(template["spec"]["containers"])}
            yield ("", "v1", "pods", namespace, pod_name), pod


def for_trainjob(store, trainjob: Dict[str, Any]) -> List[ObjectKey]:
    """Stores what Trainer v2.3 and JobSet make of a TrainJob on kfdist's runtimes, and returns
    the pods' keys: JobSet `<name>` owned by the TrainJob, its Job `<name>-node-0` (Indexed), and
    `trainer.numNodes` pods `<name>-node-0-<i>-<5 random>` owned by the Job, labelled as JobSet
    and the Job controller label them and running `trainer`'s image and command in `node`."""
    name, namespace = trainjob["metadata"]["name"], trainjob["metadata"]["namespace"]
    jobset = store.create(JOBSETS + (namespace, name), {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"ownerReferences": [_owner(trainjob)]}, "spec": {}})
    labels = {JOBSET_NAME_LABEL: name, "jobset.sigs.k8s.io/jobset-uid": jobset["metadata"]["uid"],
              REPLICATED_JOB_LABEL: NODE, "jobset.sigs.k8s.io/job-index": "0",
              "jobset.sigs.k8s.io/restart-attempt": "0"}
    job_name = f"{name}-{NODE}-0"
    job = store.create(JOBS + (namespace, job_name), {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"labels": labels, "ownerReferences": [_owner(jobset)]},
        "spec": {"completionMode": "Indexed"}})
    trainer = trainjob["spec"].get("trainer") or {}
    container = {"name": NODE, "image": trainer.get("image", ""),
                 "command": list(trainer.get("command") or [])}
    keys = []
    for index in range(int(trainer.get("numNodes") or 1)):
        suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
        key = PODS + (namespace, f"{job_name}-{index}-{suffix}")
        spec = {"containers": [copy.deepcopy(container)], "restartPolicy": "Never",
                "hostname": f"{job_name}-{index}", "subdomain": name}
        store.create(key, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"labels": dict(labels, **{COMPLETION_INDEX_LABEL: str(index),
                                                   "batch.kubernetes.io/job-name": job_name}),
                         "annotations": {COMPLETION_INDEX_LABEL: str(index)},
                         "ownerReferences": [_owner(job)]},
            "spec": spec, "status": pending_status(spec["containers"])})
        keys.append(key)
    return keys


def display(pod: Dict[str, Any]) -> str:
    """`chief-0`, `worker-1`, `launcher`, `node-0`."""
    labels = pod["metadata"]["labels"]
    if REPLICATED_JOB_LABEL in labels:
        return f"{labels[REPLICATED_JOB_LABEL]}-{labels[COMPLETION_INDEX_LABEL]}"
    if labels.get(JOB_ROLE_LABEL) == "launcher":
        return "launcher"
    return f"{labels.get(REPLICA_TYPE_LABEL) or labels.get(JOB_ROLE_LABEL)}-{labels[REPLICA_INDEX_LABEL]}"


def replica_type(pod: Dict[str, Any]) -> str:
    """The replica type as the job spec spells it (`Worker`, `Launcher`)."""
    return pod["metadata"]["annotations"]["kfdist.test/replica-type"]


def pending_status(containers: List[Dict[str, Any]]) -> Dict[str, Any]:
    """A new pod's status: Pending, its containers waiting in ContainerCreating."""
    return {"phase": "Pending", "conditions": [],
            "containerStatuses": [_waiting(c, "ContainerCreating") for c in containers]}


def _waiting(container: Dict[str, Any], reason: str) -> Dict[str, Any]:
    return {"name": container["name"], "image": container.get("image", ""), "ready": False,
            "restartCount": 0, "state": {"waiting": {"reason": reason}}}


def start_running(pod: Dict[str, Any]) -> None:
    """Scheduled on a node, containers running."""
    now = now_rfc3339()
    pod["spec"]["nodeName"] = "node-1"
    pod["status"].update(
        phase="Running", startTime=now,
        conditions=[{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
        containerStatuses=[{"name": c["name"], "image": c.get("image", ""), "ready": True,
                            "restartCount": 0, "state": {"running": {"startedAt": now}}}
                           for c in pod["spec"]["containers"]])


def terminate(pod: Dict[str, Any], reason: str, exit_code: int) -> None:
    """Every container exited with `exit_code`; phase follows."""
    now = now_rfc3339()
    pod["status"]["phase"] = "Succeeded" if exit_code == 0 else "Failed"
    for status in pod["status"]["containerStatuses"]:
        status.update(ready=False, state={"terminated": {"exitCode": exit_code, "reason": reason,
                                                         "startedAt": now, "finishedAt": now}})


def replica_statuses(pods: List[Dict[str, Any]]) -> Dict[str, Dict[str, int]]:
    """`status.replicaStatuses` as the operator counts them."""
    counts: Dict[str, Dict[str, int]] = {}
    for pod in pods:
        field = {"Running": "active", "Succeeded": "succeeded",
                 "Failed": "failed"}.get(pod["status"]["phase"])
        entry = counts.setdefault(replica_type(pod), {})
        if field:
            entry[field] = entry.get(field, 0) + 1
    return counts


def jobs_status(pods: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """A TrainJob's `status.jobsStatus`: JobSet's count of its one Job `node` (a Job is active
    until its pods have all ended, and ready while they all run)."""
    phases = [pod["status"]["phase"] for pod in pods]
    ended = bool(phases) and all(p in ("Succeeded", "Failed") for p in phases)
    failed = "Failed" in phases and ended
    ready = bool(phases) and all(p == "Running" for p in phases)
    return [{"name": NODE, "active": int(not ended), "ready": int(ready),
             "succeeded": int(ended and not failed), "failed": int(failed), "suspended": 0}]


def set_trainjob_condition(trainjob: Dict[str, Any], ctype: str, reason: str, message: str,
                           jobs_status_now: List[Dict[str, Any]], now: str) -> None:
    """Sets condition `ctype` on a TrainJob as Trainer does (`meta.SetStatusCondition`: one
    condition per type, the JobSet's Complete or Failed copied), in place."""
    status = trainjob.setdefault("status", {})
    status["conditions"] = [c for c in status.get("conditions") or [] if c["type"] != ctype] + [
        {"type": ctype, "status": "True", "reason": reason, "message": message,
         "lastTransitionTime": now}]
    status["jobsStatus"] = jobs_status_now


def set_job_condition(job: Dict[str, Any], ctype: str, reason: str, message: str,
                      replica_statuses_now: Dict[str, Dict[str, int]], now: str,
                      status_value: str = "True") -> None:
    """Sets condition `ctype` on `job` as the operators do, in place.

    A terminal condition (Succeeded/Failed) turns Running to False and sets
    completionTime; Running and Restarting replace each other (the operator's
    `filterOutCondition`); the replica statuses are refreshed.
    """
    status = job.setdefault("status", {})
    replaced = {ctype, {"Running": "Restarting", "Restarting": "Running"}.get(ctype)}
    kept = []
    for c in status.get("conditions") or []:
        if c["type"] in replaced:
            continue
        if ctype in ("Succeeded", "Failed") and c["type"] == "Running":
            c = dict(c, status="False")
        kept.append(c)
    kept.append({"type": ctype, "status": status_value, "reason": reason, "message": message,
                 "lastUpdateTime": now, "lastTransitionTime": now})
    status["conditions"] = kept
    status["replicaStatuses"] = replica_statuses_now
    status.setdefault("startTime", now)
    if ctype in ("Succeeded", "Failed"):
        status["completionTime"] = now
