"""Pod and event objects shaped like the ones the operators and the kubelet write."""

from __future__ import annotations

import copy
import random
import string
from typing import Any, Dict, Iterator, List, Tuple

from kfdist.components.train_distributed.kubernetes.build.job_kinds import (
    JOB_NAME_LABEL, JOB_ROLE_LABEL, REPLICA_INDEX_LABEL, REPLICA_TYPE_LABEL)
from fakes.kube_server.store import ObjectKey, now_rfc3339

OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"


def for_job(job_key: ObjectKey, job: Dict[str, Any]) -> Iterator[Tuple[ObjectKey, Dict[str, Any]]]:
    """The pods an operator creates: TFJob Chief/PS/Worker/Evaluator, PyTorchJob Master/Worker,
    MPIJob Launcher/Worker."""
    name, namespace = job_key[4], job_key[3]
    spec = job["spec"]
    mpi = job["kind"] == "MPIJob"
    replica_specs = spec[{"MPIJob": "mpiReplicaSpecs", "PyTorchJob": "pytorchReplicaSpecs"}.get(
        job["kind"], "tfReplicaSpecs")]
    controller = "pytorchjob-controller" if job["kind"] == "PyTorchJob" else "tfjob-controller"
    owner = {"apiVersion": job["apiVersion"], "kind": job["kind"], "name": name,
             "uid": job["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
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
                labels.update({OPERATOR_NAME_LABEL: controller, REPLICA_TYPE_LABEL: rtype.lower(),
                               REPLICA_INDEX_LABEL: str(index)})
                if rtype in ("Chief", "Master"):
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


def display(pod: Dict[str, Any]) -> str:
    """`chief-0`, `worker-1`, `launcher`."""
    labels = pod["metadata"]["labels"]
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


def restart_container(pod: Dict[str, Any], exit_code: int) -> None:
    """The kubelet restarted the containers in place (restartPolicy OnFailure/Always)."""
    now = now_rfc3339()
    for status in pod["status"]["containerStatuses"]:
        status.update(restartCount=status.get("restartCount", 0) + 1, ready=True,
                      lastState={"terminated": {"exitCode": exit_code, "reason": "Error",
                                                "finishedAt": now}},
                      state={"running": {"startedAt": now}})


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
