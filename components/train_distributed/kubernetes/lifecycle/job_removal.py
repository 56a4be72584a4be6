"""Deleting a job the step owns and waiting until the API no longer serves it.

Used on timeout, cancellation (SIGTERM) and unexpected errors, so that a step
never leaves a job behind. Deletion uses Background propagation: the job
object goes at once and the garbage collector removes its pods (which the
operators create with ownerReferences to the job), which fits inside the
~30 s a terminated pod is given. A uid precondition makes sure only the
object this step owns is deleted.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Optional

from kfdist.components.train_distributed.kubernetes.client.api_retry import RetryPolicy, call_with_retry
from kfdist.components.train_distributed.kubernetes.build.job_kinds import RenderedJob
from kfdist.components.train_distributed.kubernetes.client.kube_errors import (
    ConflictError, KubeApiError, NotFoundError, ResourceExpiredError, TransientApiError)

#: Retries while cleaning up are kept short: a terminated pod has ~30 s in all.
CLEANUP_RETRY = RetryPolicy(initial_backoff_seconds=0.1, max_backoff_seconds=1.0,
                            budget_seconds=8.0)
#: How long to wait for the API to confirm the job is gone.
DELETE_WAIT_SECONDS = 15.0


def delete_job_and_wait(api, job: RenderedJob, uid: Optional[str], log: Callable[[str], None],
                        owner_annotation: str, owner_value: str,
                        wait_seconds: float = DELETE_WAIT_SECONDS) -> bool:
    """Deletes the step's job and waits until a read answers 404. Never raises `KubeApiError`.

    Args:
      api: A `KubeApi`.
      job: The job.
      uid: Its uid when known; None when it is unknown whether the create went
        through (then an existing object is deleted only if `owner_annotation`
        equals `owner_value`).
      log: Receives progress lines.
      owner_annotation: The annotation that marks the step's jobs.
      owner_value: Its value for this step.
      wait_seconds: How long to wait for the object to disappear.

    Returns:
      True when the job is confirmed gone.
    """
    what = f"{job.kind.kind} {job.namespace}/{job.name}"
    hint = f"delete it by hand: kubectl delete {job.kind.crd_name} {job.name} -n {job.namespace}"
    try:
        if uid is None:
            existing = api.get_job(job.kind, job.namespace, job.name)
            annotations = existing["metadata"].get("annotations") or {}
            if annotations.get(owner_annotation) != owner_value:
                return True  # not ours: never touch it
            uid = existing["metadata"]["uid"]
        log(f"Deleting {what}")
        call_with_retry(CLEANUP_RETRY, api.delete_job, job.kind, job.namespace, job.name,
                        propagation="Background", uid=uid)
    except (NotFoundError, ConflictError):
        return True  # already gone, or the name now belongs to another object
    except KubeApiError as error:
        log(f"Could not delete {what}: {error}; {hint}")
        return False
    if _wait_until_gone(api, job, uid, wait_seconds):
        log(f"Deleted {what}")
        return True
    log(f"{what} is still present {wait_seconds:g} s after deletion; the garbage collector "
        f"will finish, or {hint}")
    return False


def _wait_until_gone(api, job: RenderedJob, uid: str, wait_seconds: float) -> bool:
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        try:
            current = api.get_job(job.kind, job.namespace, job.name)
        except NotFoundError:
            return True
        except TransientApiError:
            time.sleep(0.2)
            continue
        except KubeApiError:
            return False
        if current["metadata"]["uid"] != uid:
            return True
        seconds = max(1, math.ceil(deadline - time.monotonic()))
        try:  # from "now": starts with the job as it is, then its DELETED event
            for event in api.watch_job(job.kind, job.namespace, job.name, None, seconds):
                if event.type == "DELETED":
                    return True
        except (ResourceExpiredError, TransientApiError):
            time.sleep(0.2)
        except KubeApiError:
            return False
    return False
