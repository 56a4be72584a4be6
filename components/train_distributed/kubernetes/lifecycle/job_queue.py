"""A job waiting in a Kueue queue, and the step's deadline counted from creation or from admission.

Kueue's webhook creates a job that carries `kueue.x-k8s.io/queue-name`
suspended (TFJob and MPIJob: `spec.runPolicy.suspend`; TrainJob:
`spec.suspend`) and unsuspends it once its ClusterQueue admits it. The
operators then write a `Suspended` condition (TFJob `TFJobSuspended`, MPIJob
`MPIJobSuspended`, TrainJob `Suspended`) and, on admission, turn it False
(`...Resumed`). The spec flag is Kueue's decision, so it is what is read here.

`timeout_from`: `creation` counts the step's timeout from the job's creation
(time in the queue included); `admission` from the moment Kueue admitted it
(a job never suspended is admitted at creation).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Optional

from kfdist.components.common.errors import require
from kfdist.components.train_distributed.job.step_params import PARAMS_BY_NAME

#: The label Kueue reads to put a job into a LocalQueue.
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
#: The values of the step parameter `timeout_from` (defined in `job.step_params`).
TIMEOUT_FROM = PARAMS_BY_NAME["timeout_from"].choices
FROM_CREATION, FROM_ADMISSION = TIMEOUT_FROM


def is_suspended(job: Mapping[str, Any]) -> bool:
    """Whether the job's spec holds it suspended (TrainJob `spec.suspend`, else `runPolicy.suspend`)."""
    spec = job.get("spec") or {}
    return bool(spec.get("suspend") or (spec.get("runPolicy") or {}).get("suspend"))


class QueueClock:
    """Follows a job's suspension and says how long the step may still wait for it."""

    def __init__(self, timeout_seconds: Optional[float], timeout_from: str, what: str,
                 log: Callable[[str], None]):
        require(timeout_from in TIMEOUT_FROM,
                f"timeout_from {timeout_from!r} is not valid; valid: {list(TIMEOUT_FROM)}")
        self.timeout_seconds, self.timeout_from = timeout_seconds, timeout_from
        self.what, self.log = what, log
        self.started = time.monotonic()
        self.deadline = None if timeout_seconds is None else self.started + timeout_seconds
        self.queued_since: Optional[float] = None
        self.admitted_at: Optional[float] = None

    @property
    def queued(self) -> bool:
        return self.queued_since is not None

    def observe(self, job: Mapping[str, Any]) -> None:
        """Notes a new state of the job: queued, or admitted after waiting."""
        now = time.monotonic()
        if is_suspended(job) and not self.queued:
            self.queued_since = now
            self.log(f"{self.what} is queued: suspended until Kueue admits it "
                     f"(queue {_queue_of(job) or '?'})")
            if self.timeout_from == FROM_ADMISSION and self.admitted_at is None:
                self.deadline = None
        elif not is_suspended(job) and self.queued:
            self.log(f"{self.what} was admitted after {now - self.queued_since:.1f} s in the queue")
            self.queued_since = None
            if self.timeout_from == FROM_ADMISSION and self.admitted_at is None:
                self.admitted_at = now
                if self.timeout_seconds is not None:
                    self.deadline = now + self.timeout_seconds

    def remaining(self) -> Optional[float]:
        """Seconds left before the step gives up; None: no limit now (or waiting for admission)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def describe_limit(self) -> str:
        """`within 60 s` or `within 60 s of its admission`, for the timeout message."""
        since = " of its admission" if self.admitted_at is not None else ""
        return f"within {self.timeout_seconds:g} s{since}"


def _queue_of(job: Mapping[str, Any]) -> Optional[str]:
    return ((job.get("metadata") or {}).get("labels") or {}).get(QUEUE_NAME_LABEL)
