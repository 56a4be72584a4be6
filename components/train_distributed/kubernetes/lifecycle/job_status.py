"""Reading job and pod status objects: pure functions over the API's plain data.

Operators (Training Operator v1, MPI Operator v2beta1) report a job's progress
as `status.conditions` of types Created, Running, Restarting, Succeeded and
Failed; Kubeflow Trainer's TrainJob as Suspended, Complete and Failed. The
newest condition with status "True" of a terminal type decides the outcome.
Pods explain failures through container states and the PodScheduled
condition.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from kfdist.components.train_distributed.kubernetes.build.job_kinds import (
    COMPLETION_INDEX_LABEL, JOB_ROLE_LABEL, REPLICA_INDEX_LABEL, REPLICA_TYPE_LABEL,
    REPLICATED_JOB_LABEL)

SUCCEEDED = "Succeeded"
#: A TrainJob's success.
COMPLETE = "Complete"
FAILED = "Failed"
#: The container TFJob pods must use (TF_CONFIG is only injected there).
TENSORFLOW_CONTAINER = "tensorflow"
#: PodScheduled reasons of a pod the scheduler will place without help: its own error in a
#: binding cycle (two pods binding one claim at once: "the object has been modified"), which it
#: retries; its FailedScheduling event stays for a diagnosis should the pod never start.
RETRIED_SCHEDULING_REASONS = frozenset({"SchedulerError"})
#: Waiting reasons that mean a container will not start without help.
STUCK_WAITING_REASONS = frozenset({
    "ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CrashLoopBackOff",
    "CreateContainerConfigError", "CreateContainerError", "RunContainerError"})


@dataclasses.dataclass(frozen=True)
class JobCondition:
    """One entry of `status.conditions`."""

    type: str
    status: str
    reason: str
    message: str

    def describe(self) -> str:
        """`Type (Reason): message`, for log lines and errors."""
        return f"{self.type} ({self.reason}): {self.message}" if self.reason else self.type


def job_conditions(job: Mapping[str, Any]) -> List[JobCondition]:
    """The job's conditions in the order the operator wrote them."""
    return [JobCondition(c.get("type", ""), str(c.get("status", "")), c.get("reason") or "",
                         c.get("message") or "")
            for c in (job.get("status") or {}).get("conditions") or []]


def active_conditions(job: Mapping[str, Any]) -> List[JobCondition]:
    """Conditions whose status is "True"."""
    return [c for c in job_conditions(job) if c.status == "True"]


def terminal_condition(job: Mapping[str, Any]) -> Optional[JobCondition]:
    """The Succeeded (Complete) or Failed condition that holds, or None while the job runs."""
    for condition in reversed(active_conditions(job)):
        if condition.type in (SUCCEEDED, COMPLETE, FAILED):
            return condition
    return None


def trainer_progress(job: Mapping[str, Any]) -> Optional[str]:
    """A TrainJob's `status.trainerStatus` (what its trainer posted to Trainer's status API) as
    one line, `Progress 40%, about 12 s left; accuracy=0.91, loss=0.31`, or None without one."""
    status = (job.get("status") or {}).get("trainerStatus")
    if not status:
        return None
    parts = []
    if status.get("progressPercentage") is not None:
        parts.append(f"{status['progressPercentage']}%")
    if status.get("estimatedRemainingSeconds") is not None:
        parts.append(f"about {status['estimatedRemainingSeconds']} s left")
    metrics = ", ".join(f"{m.get('name')}={m.get('value')}" for m in status.get("metrics") or [])
    return "Progress " + ", ".join(parts or ["reported"]) + (f"; {metrics}" if metrics else "")


def is_being_deleted(obj: Mapping[str, Any]) -> bool:
    """Whether `metadata.deletionTimestamp` is set."""
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def replica_summary(job: Mapping[str, Any]) -> str:
    """`Chief: 1 succeeded; Worker: 1 failed, 1 active` from `status.replicaStatuses`, or a
    TrainJob's `Job node: 1 failed` from `status.jobsStatus` (counts of Jobs, not pods)."""
    status = job.get("status") or {}
    by_type = dict(status.get("replicaStatuses") or {})
    by_type.update({f"Job {j.get('name')}": j for j in status.get("jobsStatus") or []})
    parts = []
    for rtype, counts in sorted(by_type.items()):
        numbers = [f"{counts[k]} {k}" for k in ("active", "succeeded", "failed") if counts.get(k)]
        if numbers:
            parts.append(f"{rtype}: {', '.join(numbers)}")
    return "; ".join(parts)


def pod_display_name(pod: Mapping[str, Any]) -> str:
    """`chief-0`, `worker-1`, `launcher` (a TrainJob's: `node-0`): the replica a pod plays, else its name."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    replica_type, role = labels.get(REPLICA_TYPE_LABEL), labels.get(JOB_ROLE_LABEL)
    replicated_job = labels.get(REPLICATED_JOB_LABEL)
    if replicated_job is not None:
        return ("launcher" if replicated_job == "launcher"
                else f"{replicated_job}-{labels.get(COMPLETION_INDEX_LABEL, '0')}")
    if "launcher" in (replica_type, role):
        return "launcher"
    index = labels.get(REPLICA_INDEX_LABEL)
    if (replica_type or role) and index is not None:  # TFJob chiefs have job-role=master
        return f"{(replica_type or role).lower()}-{index}"
    return (pod.get("metadata") or {}).get("name", "pod")


def main_container(pod: Mapping[str, Any]) -> str:
    """The container whose log matters: `tensorflow` when present, else the first."""
    names = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
    if TENSORFLOW_CONTAINER in names:
        return TENSORFLOW_CONTAINER
    return names[0] if names else TENSORFLOW_CONTAINER


def container_status(pod: Mapping[str, Any], container: str) -> Dict[str, Any]:
    """`status.containerStatuses[]` of one container ({} until the kubelet reports it)."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == container:
            return status
    return {}


def container_started(pod: Mapping[str, Any], container: str) -> bool:
    """Whether the container runs or ran, i.e. has a log to read."""
    state = container_status(pod, container).get("state") or {}
    return "running" in state or "terminated" in state


def container_terminated(pod: Mapping[str, Any], container: str) -> bool:
    """Whether the container's current state is terminated."""
    return "terminated" in (container_status(pod, container).get("state") or {})


def restart_count(pod: Mapping[str, Any], container: str) -> int:
    """How often the kubelet restarted the container."""
    return int(container_status(pod, container).get("restartCount") or 0)


def pod_problems(pod: Mapping[str, Any]) -> List[str]:
    """Why a pod is not making progress or failed, one phrase per reason.

    Covers Unschedulable (PodScheduled condition; not the scheduler's own errors,
    which it retries), stuck waiting containers (ImagePullBackOff,
    CrashLoopBackOff, ...), terminated containers with a non-zero exit (OOMKilled
    exit code 137, Error exit code 1) in the current or last state, and
    pod-level reasons such as Evicted.
    """
    status = pod.get("status") or {}
    problems = []
    for condition in status.get("conditions") or []:
        if (condition.get("type") == "PodScheduled" and condition.get("status") == "False"
                and condition.get("reason") not in RETRIED_SCHEDULING_REASONS):
            problems.append(f"{condition.get('reason') or 'Unschedulable'}: "
                            f"{condition.get('message') or 'no node fits'}")
    if status.get("reason"):
        problems.append(f"{status['reason']}: {status.get('message') or ''}".rstrip(": "))
    statuses = (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])
    for container in statuses:
        problems.extend(_container_problems(container))
    return problems


def _container_problems(container: Mapping[str, Any]) -> List[str]:
    name = container.get("name", "?")
    problems = []
    waiting = (container.get("state") or {}).get("waiting") or {}
    if waiting.get("reason") in STUCK_WAITING_REASONS:
        detail = f": {waiting['message']}" if waiting.get("message") else ""
        problems.append(f"container {name} {waiting['reason']}{detail}")
    for which in ("state", "lastState"):
        terminated = (container.get(which) or {}).get("terminated") or {}
        if terminated and terminated.get("exitCode", 0) != 0:
            prefix = "last run " if which == "lastState" else ""
            problems.append(f"container {name} {prefix}terminated: "
                            f"{terminated.get('reason') or 'Error'} "
                            f"(exit code {terminated.get('exitCode')})")
    return problems


def warning_event_lines(events: Sequence[Mapping[str, Any]], limit: int = 3) -> List[str]:
    """`Reason: message` of the newest distinct Warning events (e.g. FailedScheduling)."""
    lines: List[str] = []
    for event in reversed(list(events)):
        if event.get("type") != "Warning":
            continue
        line = f"{event.get('reason')}: {event.get('message', '').strip()}"
        if line not in lines:
            lines.append(line)
        if len(lines) == limit:
            break
    return lines


def older_version(pod: Mapping[str, Any], known: Optional[Mapping[str, Any]]) -> bool:
    """Whether `pod` is an older version of `known` (same uid, lower resourceVersion).

    resourceVersions are opaque by contract but are etcd revisions, integers
    that only grow, on every real apiserver; anything else is never "older".
    """
    if known is None or known["metadata"].get("uid") != pod["metadata"].get("uid"):
        return False
    try:
        return int(pod["metadata"]["resourceVersion"]) < int(known["metadata"]["resourceVersion"])
    except (KeyError, ValueError):
        return False


def creation_order(pod: Mapping[str, Any]) -> Tuple[str, str]:
    """A sort key of pods: oldest first (then by name)."""
    return pod["metadata"].get("creationTimestamp") or "", pod["metadata"]["name"]


def container_run(pod: Mapping[str, Any], container: str) -> Tuple[str, int]:
    """One run of `container` in `pod`: (the pod's uid, the container's restart count)."""
    return pod["metadata"].get("uid", ""), restart_count(pod, container)
