"""A test-side Training/MPI operator: turns each created job into pods and status, by script.

For every TFJob or MPIJob created in the store it creates the pods the real
operator would (names, labels, ownerReferences), moves them Pending → Running
→ Succeeded/Failed, writes the chief's/launcher's log, and sets the job's
conditions (Created, Running, Succeeded or Failed with the operator's reasons
and messages), following a `Scenario`. Deleting the job stops the script; the
store's garbage collection deletes the pods.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Callable, Dict, List, Optional, Tuple

from fakes.kube_server import pods as pod_objects
from fakes.kube_server.store import NotFound, ObjectKey, ObjectStore, now_rfc3339

SUCCEEDED, FAILED, HANG = "Succeeded", "Failed", "Hang"


@dataclasses.dataclass(frozen=True)
class Scenario:
    """What happens to a job.

    Attributes:
      outcome: `Succeeded`, `Failed`, or `Hang` (never finishes).
      pending_seconds: Time the pods spend Pending.
      run_seconds: Time they spend Running (log lines are spread over it).
      log_lines: What the chief (or launcher) prints.
      pod_failure: None, `OOMKilled` or `Error` (a pod stuck Pending, on an image it cannot
        pull or a node it cannot have, is shown on the real control plane: tests/containers/).
      failing_replica: The pod that fails, e.g. `worker-0` (default: the chief/launcher).
      on_running: Called once the job is Running (e.g. to compact watch history).
    """

    outcome: str = SUCCEEDED
    pending_seconds: float = 0.3
    run_seconds: float = 0.4
    log_lines: Tuple[str, ...] = ("epoch 1/2 loss=0.91", "epoch 2/2 loss=0.42", "saved model")
    pod_failure: Optional[str] = None
    failing_replica: Optional[str] = None
    on_running: Optional[Callable[[], None]] = None


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
        if key[2] == "trainjobs":  # no pods: the JobSet's first Job fails at once
            threading.Thread(target=self._fail_trainjob, args=(key,), daemon=True).start()
        elif key[2] in ("tfjobs", "mpijobs"):
            scenario = self.scenarios.get(key[4], self.default)
            threading.Thread(target=self._run, args=(key, job, scenario), daemon=True).start()

    def _fail_trainjob(self, key: ObjectKey) -> None:
        message = ("jobset failed due to one or more job failures "
                   f"(first failed job: {key[4]}-node-0)")

        def fail(job: dict) -> None:
            job.setdefault("status", {})["conditions"] = [
                {"type": FAILED, "status": "True", "reason": "FailedJobs", "message": message}]
        if not self._stop.wait(0.1):
            try:
                self.store.update(key, fail)
            except NotFound:
                pass

    def _run(self, key: ObjectKey, job: dict, scenario: Scenario) -> None:
        try:
            _Script(self, key, job, scenario).play()
        except (NotFound, _Deleted):
            pass  # the job (and with it its pods) was deleted


class _Deleted(Exception):
    pass


class _Script:
    def __init__(self, operator: FakeOperator, key: ObjectKey, job: dict, scenario: Scenario):
        self.op, self.store, self.key, self.scenario = operator, operator.store, key, scenario
        self.kind, self.uid = job["kind"], job["metadata"]["uid"]
        self.who = f"{self.kind} {key[3]}/{key[4]}"
        self.pods: List[ObjectKey] = []
        for pod_key, pod in pod_objects.for_job(key, job):
            self.store.create(pod_key, pod)
            self.pods.append(pod_key)
        names = [pod_objects.display(self.store.get(pk)) for pk in self.pods]
        self.log_pod = self.pods[names.index("launcher" if "launcher" in names else
                                             "chief-0" if "chief-0" in names else "worker-0")]
        failing = scenario.failing_replica
        self.failing_pod = self.pods[names.index(failing)] if failing else self.log_pod

    def play(self) -> None:
        s = self.scenario
        self.condition("Created", f"{self.kind}Created", f"{self.kind} {self.key[4]} is created.")
        self.wait(s.pending_seconds)
        for pod in self.pods:
            self.store.update(pod, pod_objects.start_running)
        self.condition("Running", f"{self.kind}Running", f"{self.who} is running.")
        if s.on_running:
            s.on_running()
        pod_uid = self.store.get(self.log_pod)["metadata"]["uid"]
        for line in s.log_lines:
            self.wait(s.run_seconds / max(1, len(s.log_lines)))
            self.store.append_log(pod_uid, line)
        if s.outcome == HANG:
            return
        if s.outcome == SUCCEEDED:
            for pod in self.pods:
                self.terminate(pod, "Completed", 0)
            self.wait(0.05)
            self.finish(SUCCEEDED, f"{self.kind}Succeeded", f"{self.who} successfully completed.")
            return
        reason, code = ("OOMKilled", 137) if s.pod_failure == "OOMKilled" else ("Error", 1)
        self.terminate(self.failing_pod, reason, code)
        for pod in self.pods:  # cleanPodPolicy: Running
            if pod != self.failing_pod:
                self.store.delete(pod)
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

    def condition(self, ctype: str, reason: str, message: str) -> None:
        def add(job: dict) -> None:
            pod_objects.set_job_condition(job, ctype, reason, message, pod_objects.replica_statuses(
                [self.store.get(k) for k in self.pods if _exists(self.store, k)]), now_rfc3339())
        self.store.update(self.key, add)

    def finish(self, ctype: str, reason: str, message: str) -> None:
        self.op.terminal_at[self.key[4]] = time.monotonic()  # just before watchers can see it
        self.condition(ctype, reason, message)


def _exists(store: ObjectStore, key: ObjectKey) -> bool:
    try:
        store.get(key)
        return True
    except NotFound:
        return False
