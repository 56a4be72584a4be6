"""Submits a rendered TFJob/MPIJob and follows it to the end: the training step's core.

`launch_and_wait` creates the job (or re-attaches to the one an earlier attempt
of the same step created, see `job_adoption`), streams the chief's or
launcher's log (`pod_logs`), waits with a watch (re-reading on 410 Gone,
retrying 5xx and dropped connections with backoff) and ends like the job:
Succeeded returns a `JobOutcome`, Failed raises `TrainingFailedError` with the
operator's reason and the pods' (OOMKilled, ImagePullBackOff, Unschedulable).
On timeout, SIGTERM (inside `cancel_on_sigterm`) or any other error it deletes
the job it owns, so nothing is left behind. The `KubeApi` is passed in.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from typing import Any, Callable, Dict, List, Optional

from kfdist.components.common.errors import TrainingFailedError
from kfdist.components.train_distributed.kubernetes.lifecycle import job_status as js
from kfdist.components.train_distributed.kubernetes.client.api_retry import Backoff, RetryPolicy, call_with_retry
from kfdist.components.train_distributed.kubernetes.lifecycle.job_adoption import (  # noqa: F401  (re-exported)
    SPEC_HASH_ANNOTATION, JobClaim, JobNameConflictError, create_or_adopt, delete_claimed,
    prepare_body, spec_hash)
from kfdist.components.train_distributed.kubernetes.lifecycle.job_diagnosis import diagnose_pods
from kfdist.components.train_distributed.kubernetes.lifecycle.job_queue import (
    FROM_CREATION, QueueClock)
from kfdist.components.train_distributed.kubernetes.build.job_kinds import RenderedJob
from kfdist.components.train_distributed.kubernetes.client.kube_api import KubeApi, OwnerRef
from kfdist.components.train_distributed.kubernetes.client.kube_errors import (
    KubeApiError, NotFoundError, ResourceExpiredError, TransientApiError)
from kfdist.components.train_distributed.kubernetes.lifecycle.pod_logs import PodLogFollower
from kfdist.components.train_distributed.kubernetes.lifecycle.step_signals import (  # noqa: F401  (re-exported)
    StepCancelled, cancel_on_sigterm, shielded)

#: Longest single watch request; the loop re-watches from the last resourceVersion.
WATCH_SECONDS = 60


class JobTimeoutError(TrainingFailedError):
    """The job did not finish in time; it has been deleted."""


@dataclasses.dataclass(frozen=True)
class JobOutcome:
    """A job that succeeded.

    Attributes:
      kind: The job's kind, e.g. `TFJob`.
      namespace: Its namespace.
      name: Its name.
      uid: Its uid.
      adopted: True when an earlier attempt of the step had created it.
      reason: Reason of the Succeeded condition, e.g. `TFJobSucceeded`.
      message: Message of the Succeeded condition.
      elapsed_seconds: Time this call took.
      restarts: Replica restarts seen while following the job (`PodLogFollower.restarts`).
    """

    kind: str
    namespace: str
    name: str
    uid: str
    adopted: bool
    reason: str
    message: str
    elapsed_seconds: float
    restarts: int = 0


def launch_and_wait(job: RenderedJob, api: KubeApi, *, timeout_seconds: Optional[float],
                    log: Callable[[str], None], owner: Optional[OwnerRef],
                    retry: RetryPolicy = RetryPolicy(),
                    log_drain_seconds: float = 1.0,
                    timeout_from: str = FROM_CREATION) -> JobOutcome:
    """Creates (or re-attaches to) `job`, streams its logs and waits for it to end.

    Args:
      job: The rendered TFJob, MPIJob or TrainJob.
      api: The Kubernetes API.
      timeout_seconds: Give up (and delete the job) after this long; None: wait forever.
      log: Receives progress and log lines; called from two threads, one at a time.
      owner: The step's pod, set as the job's ownerReference; None: no owner.
      retry: Backoff and budget for API failures.
      log_drain_seconds: How long the log stream may take to catch up at the end.
      timeout_from: `creation` or `admission`: when `timeout_seconds` starts for a job that
        waits in a Kueue queue (see `job_queue`).

    Returns:
      The outcome of a job that succeeded.

    Raises:
      TrainingFailedError: The job failed (reason included).
      JobTimeoutError: It did not finish in time (it was deleted).
      JobNameConflictError: A job of that name exists that this step did not create.
      KubeApiError: The API refused (CRD not installed, RBAC) or stayed unreachable.
      StepCancelled: SIGTERM inside `cancel_on_sigterm` (the job was deleted).
    """
    clock = QueueClock(timeout_seconds, timeout_from, f"{job.kind.kind} {job.namespace}/{job.name}",
                       _serialized(log))
    return _Launch(job, api, clock.log, retry, clock).run(owner, log_drain_seconds)


class _DeadlineReached(Exception):
    def __init__(self, last_seen: Dict[str, Any]):
        super().__init__("deadline reached")
        self.last_seen = last_seen


class _Launch:
    """One call of `launch_and_wait`: the job, what is known about it, the clock."""

    def __init__(self, job: RenderedJob, api: KubeApi, log: Callable[[str], None],
                 retry: RetryPolicy, clock: QueueClock):
        self.job, self.api, self.log, self.retry, self.clock = job, api, log, retry, clock
        self.what = clock.what
        self.started = clock.started
        self.claim = JobClaim()
        self.noted: set = set()
        self.progress: Optional[str] = None

    def run(self, owner: Optional[OwnerRef], log_drain_seconds: float) -> JobOutcome:
        if owner is not None and owner.namespace != self.job.namespace:
            self.log(f"No ownerReference: the step's pod is in namespace {owner.namespace}, "
                     f"the job in {self.job.namespace} (owners must share the namespace)")
        follower = PodLogFollower(self.api, self.job.namespace, self.job.pods_selector(),
                                  self.job.log_pod_selector, self.log, self.retry)
        try:
            current, adopted = create_or_adopt(self.api, self.job, owner, self.claim,
                                               self.retry, self.log)
            follower.start()
            final = self._wait_for_end(current)
        except _DeadlineReached as reached:
            with shielded():
                follower.finish(0)
                problems = diagnose_pods(self.api, self.job, follower.problems(), self.log)
                delete_claimed(self.api, self.job, self.claim, self.log)
            raise JobTimeoutError(self._timeout_message(reached.last_seen, problems)) from None
        except BaseException:
            with shielded():  # the job first: a terminated KFP step has about a second
                delete_claimed(self.api, self.job, self.claim, self.log)
                follower.finish(0)
            raise
        follower.finish(log_drain_seconds)
        condition = js.terminal_condition(final)
        if condition.type == js.FAILED:
            problems = diagnose_pods(self.api, self.job, follower.problems(), self.log)
            raise TrainingFailedError(self._failure_message(final, condition, problems))
        self.log(f"{self.what} succeeded: {condition.message or condition.reason}")
        try:
            follower.take_census()
        except KubeApiError as error:
            self.log(f"Could not count the replicas' restarts: {error}")
        return JobOutcome(self.job.kind.kind, self.job.namespace, self.job.name,
                          final["metadata"]["uid"], adopted, condition.reason, condition.message,
                          time.monotonic() - self.started, follower.restarts())

    def _wait_for_end(self, current: Dict[str, Any]) -> Dict[str, Any]:
        resource_version = current["metadata"]["resourceVersion"]
        self._note(current)
        backoff = Backoff(self.retry, self.log)
        while js.terminal_condition(current) is None:
            remaining = self._remaining()
            if remaining is not None and remaining <= 0:
                raise _DeadlineReached(current)
            seconds = WATCH_SECONDS if remaining is None else max(
                1, min(WATCH_SECONDS, math.ceil(remaining)))
            try:
                for event in self.api.watch_job(self.job.kind, self.job.namespace, self.job.name,
                                                resource_version, seconds):
                    backoff.reset()
                    resource_version = event.resource_version or resource_version
                    if event.type == "DELETED":
                        raise TrainingFailedError(self._deleted_message())
                    if event.type in ("ADDED", "MODIFIED"):
                        current = event.object
                        self._note(current)
                    if js.terminal_condition(current) or self._past_deadline():
                        break
                else:
                    backoff.reset()  # the server ended the watch cleanly
            except ResourceExpiredError:
                # Re-read the job, then watch from "now": the object's own resourceVersion
                # may be older than the compacted history too.
                self.log("Watch expired (410 Gone): re-reading the job and watching afresh")
                try:
                    current = call_with_retry(self.retry, self.api.get_job, self.job.kind,
                                              self.job.namespace, self.job.name, log=self.log)
                except NotFoundError:
                    raise TrainingFailedError(self._deleted_message()) from None
                resource_version = None
                self._note(current)
            except TransientApiError as error:
                backoff.pause_or_raise(error, self.clock.deadline)
        return current

    def _deleted_message(self) -> str:
        return (f"{self.what} was deleted while the step waited for it (by a user, or by "
                f"ttlSecondsAfterFinished)")

    def _note(self, job_object: Dict[str, Any]) -> None:
        self.clock.observe(job_object)
        for condition in js.active_conditions(job_object):
            if condition not in self.noted:
                self.noted.add(condition)
                self.log(f"{self.what}: {condition.describe()}")
        progress = js.trainer_progress(job_object)
        if progress and progress != self.progress:
            self.progress = progress
            self.log(f"{self.what}: {progress}")

    def _remaining(self) -> Optional[float]:
        return self.clock.remaining()

    def _past_deadline(self) -> bool:
        remaining = self._remaining()
        return remaining is not None and remaining <= 0

    def _failure_message(self, final: Dict[str, Any], condition: js.JobCondition,
                         problems: List[str]) -> str:
        parts = [f"{self.what} failed: {condition.describe().rstrip('.')}"]
        if js.replica_summary(final):
            parts.append(f"replicas: {js.replica_summary(final)}")
        if problems:
            parts.append("pod problems: " + "; ".join(problems))
        return ". ".join(parts)

    def _timeout_message(self, last_seen: Dict[str, Any], problems: List[str]) -> str:
        conditions = js.active_conditions(last_seen)
        state = ", ".join(c.describe() for c in conditions) or "no conditions yet"
        parts = [f"{self.what} did not finish {self.clock.describe_limit()} and was deleted "
                 f"(last state: {state})"]
        if problems:
            parts.append("pod problems: " + "; ".join(problems))
        return ". ".join(parts)


def _serialized(log: Callable[[str], None]) -> Callable[[str], None]:
    """`log` for several threads, one line at a time; lines are dropped once the reader is gone.

    A KFP step's output is read by KFP's launcher, which the same SIGTERM ends at once
    (Argo signals the step's whole process group): a line written after that breaks the
    pipe, and must not stop the job's deletion.
    """
    lock = threading.Lock()
    reader_gone = False

    def serialized_log(line: str) -> None:
        nonlocal reader_gone
        with lock:
            if reader_gone:
                return
            try:
                log(line)
            except BrokenPipeError:
                reader_gone = True
    return serialized_log
