"""A test-side Training/MPI operator and Trainer: turns each created job into pods and status, by
script.

For every TFJob or MPIJob created in the store it creates the pods the real
operator would (names, labels, ownerReferences), moves them Pending → Running
→ Succeeded/Failed, writes the chief's/launcher's log, and sets the job's
conditions (Created, Running, Succeeded or Failed with the operator's reasons
and messages), following a `Scenario`. For a TrainJob it does what Trainer v2.3
and JobSet do on kfdist's runtimes, as far as the launcher sees it: a JobSet, its
Job `node` and that Job's pods labelled as JobSet labels them (`pods.for_trainjob`),
node 0's log, `status.jobsStatus`, and only the terminal condition, copied from
the JobSet: `Complete` (`AllJobsCompleted`) or `Failed` (`FailedJobs`). Deleting
the job stops the script; the store's garbage collection deletes the pods.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Callable, Dict, List, Optional, Tuple

from fakes.kube_server import pods as pod_objects
from fakes.kube_server.store import NotFound, ObjectKey, ObjectStore, now_rfc3339

SUCCEEDED, FAILED, HANG = "Succeeded", "Failed", "Hang"
#: Trainer v2.3's TrainJob conditions: the JobSet's, copied (its `Complete` is the success).
TRAINJOB_COMPLETE = ("Complete", "AllJobsCompleted", "jobset completed successfully")
TRAINJOB_FAILED = ("Failed", "FailedJobs", "jobset failed due to one or more job failures "
                                           "(first failed job: {job})")


@dataclasses.dataclass(frozen=True)
class Scenario:
    """What happens to a job.

    Attributes:
      outcome: `Succeeded`, `Failed`, or `Hang` (never finishes).
      pending_seconds: Time the pods spend Pending.
      run_seconds: Time they spend Running (log lines are spread over it).
      log_lines: What the chief (or launcher, or a TrainJob's node 0) prints.
      pod_failure: None, `OOMKilled` or `Error` (a pod stuck Pending, on an image it cannot
        pull or a node it cannot have, is shown on the real control plane: tests/containers/).
      failing_replica: The pod that fails, e.g. `worker-0` (default: the chief/launcher/node-0).
      on_running: Called once the job is Running (a TrainJob: its pods), e.g. to compact watch
        history.
      status_lag_seconds: How long after the containers exit (their logs end) the pods' status
        says so, as a busy kubelet reports it late.
    """

    outcome: str = SUCCEEDED
    pending_seconds: float = 0.3
    run_seconds: float = 0.4
    log_lines: Tuple[str, ...] = ("epoch 1/2 loss=0.91", "epoch 2/2 loss=0.42", "saved model")
    pod_failure: Optional[str] = None
    failing_replica: Optional[str] = None
    on_running: Optional[Callable[[], None]] = None
    status_lag_seconds: float = 0.0


class FakeOperator:
    """Runs a `Scenario` for each job created in `store`, on its own thread."""

    def __init__(self, store: ObjectStore, default: Scenario = Scenario()):
        self.store = store
        self.default = default
        self.scenarios: Dict[str, Scenario] = {}
        #: job name -> time.monotonic() when its terminal condition was stored.
        self.terminal_at: Dict[str, float] = {}
        self._stop = threading.Event()
        store.on_create.append(self._on_create)

    def script(self, job_name: str, scenario: Scenario) -> None:
        """Uses `scenario` for the job named `job_name`."""
        self.scenarios[job_name] = scenario

    def stop(self) -> None:
        """Ends every script at its next step."""
        self._stop.set()

    def _on_create(self, key: ObjectKey, job: dict) -> None:
        script = {"tfjobs": _Script, "mpijobs": _Script, "trainjobs": _TrainJobScript}.get(key[2])
        if script is not None:
            scenario = self.scenarios.get(key[4], self.default)
            threading.Thread(target=self._run, args=(script, key, job, scenario),
                             daemon=True).start()

    def _run(self, script, key: ObjectKey, job: dict, scenario: Scenario) -> None:
        try:
            script(self, key, job, scenario).play()
        except (NotFound, _Deleted):
            pass  # the job (and with it its pods) was deleted


class _Deleted(Exception):
    pass


class _Script:
    """A TFJob or MPIJob under the Training or MPI Operator."""

    def __init__(self, operator: FakeOperator, key: ObjectKey, job: dict, scenario: Scenario):
        self.op, self.store, self.key, self.scenario = operator, operator.store, key, scenario
        self.kind, self.uid = job["kind"], job["metadata"]["uid"]
        self.who = f"{self.kind} {key[3]}/{key[4]}"
        self.pods: List[ObjectKey] = self.create_pods(job)
        names = [pod_objects.display(self.store.get(pk)) for pk in self.pods]
        log_pod = next((n for n in ("launcher", "chief-0", "node-0") if n in names), "worker-0")
        self.log_pod = self.pods[names.index(log_pod)]
        failing = scenario.failing_replica
        self.failing_pod = self.pods[names.index(failing)] if failing else self.log_pod

    def create_pods(self, job: dict) -> List[ObjectKey]:
        keys = []
        for pod_key, pod in pod_objects.for_job(self.key, job):
            self.store.create(pod_key, pod)
            keys.append(pod_key)
        return keys

    def play(self) -> None:
        s = self.scenario
        self.created()
        self.wait(s.pending_seconds)
        for pod in self.pods:
            self.store.update(pod, pod_objects.start_running)
        self.running()
        if s.on_running:
            s.on_running()
        pod_uid = self.store.get(self.log_pod)["metadata"]["uid"]
        for line in s.log_lines:
            self.wait(s.run_seconds / max(1, len(s.log_lines)))
            self.store.append_log(pod_uid, line)
        if s.outcome == HANG:
            return
        if s.outcome == SUCCEEDED:
            if s.status_lag_seconds:
                self.store.close_log(pod_uid)
                self.wait(s.status_lag_seconds)
            for pod in self.pods:
                self.terminate(pod, "Completed", 0)
            self.wait(0.05)
            self.succeeded()
            return
        reason, code = ("OOMKilled", 137) if s.pod_failure == "OOMKilled" else ("Error", 1)
        self.terminate(self.failing_pod, reason, code)
        for pod in self.pods:  # cleanPodPolicy: Running (a failed Job's active pods are deleted)
            if pod != self.failing_pod:
                self.store.delete(pod)
        self.failed()

    def created(self) -> None:
        self.condition("Created", f"{self.kind}Created", f"{self.kind} {self.key[4]} is created.")

    def running(self) -> None:
        self.condition("Running", f"{self.kind}Running", f"{self.who} is running.")

    def succeeded(self) -> None:
        self.finish(SUCCEEDED, f"{self.kind}Succeeded", f"{self.who} successfully completed.")

    def failed(self) -> None:
        rtype = pod_objects.replica_type(self.store.get(self.failing_pod))
        self.finish(FAILED, f"{self.kind}Failed",
                    f"{self.who} has failed because 1 {rtype} replica(s) failed.")

    def wait(self, seconds: float) -> None:
        if self.op._stop.wait(seconds):
            raise _Deleted()
        if self.store.get(self.key)["metadata"]["uid"] != self.uid:
            raise _Deleted()

    def terminate(self, pod_key: ObjectKey, reason: str, exit_code: int) -> None:
        pod = self.store.update(pod_key, lambda p: pod_objects.terminate(p, reason, exit_code))
        self.store.close_log(pod["metadata"]["uid"])

    def existing_pods(self) -> List[dict]:
        return [self.store.get(k) for k in self.pods if _exists(self.store, k)]

    def condition(self, ctype: str, reason: str, message: str) -> None:
        def add(job: dict) -> None:
            pod_objects.set_job_condition(job, ctype, reason, message, pod_objects.replica_statuses(
                self.existing_pods()), now_rfc3339())
        self.store.update(self.key, add)

    def finish(self, ctype: str, reason: str, message: str) -> None:
        self.op.terminal_at[self.key[4]] = time.monotonic()  # just before watchers can see it
        self.condition(ctype, reason, message)


class _TrainJobScript(_Script):
    """A TrainJob under Trainer v2.3 and JobSet: no Created or Running condition, the JobSet's
    counts in `status.jobsStatus`, and its Complete or Failed copied at the end."""

    def create_pods(self, job: dict) -> List[ObjectKey]:
        return pod_objects.for_trainjob(self.store, job)

    def created(self) -> None:
        self.update_jobs_status()

    def running(self) -> None:
        self.update_jobs_status()

    def succeeded(self) -> None:
        self.finish(*TRAINJOB_COMPLETE)

    def failed(self) -> None:
        ctype, reason, message = TRAINJOB_FAILED
        self.finish(ctype, reason, message.format(job=f"{self.key[4]}-{pod_objects.NODE}-0"))

    def update_jobs_status(self) -> None:
        jobs_status = pod_objects.jobs_status(self.existing_pods())
        self.store.update(self.key, lambda job: job.setdefault("status", {}).update(
            jobsStatus=jobs_status))

    def condition(self, ctype: str, reason: str, message: str) -> None:
        jobs_status = pod_objects.jobs_status(self.existing_pods())
        self.store.update(self.key, lambda job: pod_objects.set_trainjob_condition(
            job, ctype, reason, message, jobs_status, now_rfc3339()))


def _exists(store: ObjectStore, key: ObjectKey) -> bool:
    try:
        store.get(key)
        return True
    except NotFound:
        return False
