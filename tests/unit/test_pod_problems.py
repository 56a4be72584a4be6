"""What the training step says of a replica's pod: the reasons it will not make progress without
help, and not the scheduler's own errors, which it retries (seen on a real node: two replicas
binding one claim at once)."""

from __future__ import annotations

from kfdist.components.train_distributed.kubernetes.lifecycle.job_status import pod_problems


def _pending(reason: str, message: str) -> dict:
    return {"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}]}}


def test_an_unschedulable_pod_is_named_with_the_schedulers_words():
    assert pod_problems(_pending("Unschedulable", "0/1 nodes are available: 1 Insufficient cpu.")) \
        == ["Unschedulable: 0/1 nodes are available: 1 Insufficient cpu."]


def test_a_scheduler_error_it_retries_is_not_a_problem_of_the_pod():
    conflict = ('running PreBind plugin "VolumeBinding": Operation cannot be fulfilled on '
                'persistentvolumeclaims "team-work": the object has been modified')
    assert pod_problems(_pending("SchedulerError", conflict)) == []


def test_a_container_that_cannot_start_is_named_with_its_reason():
    pod = {"status": {"phase": "Pending", "containerStatuses": [{"name": "tensorflow", "state": {
        "waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}}}]}}
    assert pod_problems(pod) == ["container tensorflow ImagePullBackOff: Back-off pulling image"]
