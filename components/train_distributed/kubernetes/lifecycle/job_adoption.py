"""Creating the step's job, or re-attaching to the one an earlier attempt created.

Ownership: the body gets the annotation `kfdist.dev/spec-hash`, a digest of the
job's kind, name, namespace, labels and spec. When the create answers 409, an
existing job with the same digest is this step's own: a retried step
re-attaches to it (one job, not two) and adds its pod to the ownerReferences.
Any other object of that name is left untouched and the step fails with a
clear message. An own job that already failed (or is being deleted) is
deleted and created afresh, so that a step retried after a failure trains again.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from typing import Any, Callable, Dict, Optional, Tuple

from kfdist.components.common.errors import KfdistError
from kfdist.components.train_distributed.kubernetes.lifecycle import job_status as js
from kfdist.components.train_distributed.kubernetes.client.api_retry import RetryPolicy, call_with_retry
from kfdist.components.train_distributed.kubernetes.build.job_kinds import RenderedJob
from kfdist.components.train_distributed.kubernetes.lifecycle.job_removal import delete_job_and_wait
from kfdist.components.train_distributed.kubernetes.client.kube_api import OwnerRef
from kfdist.components.train_distributed.kubernetes.client.kube_errors import (
    AlreadyExistsError, KubeApiError, NotFoundError, TransientApiError)

#: Annotation holding the digest that marks a job as this step's own.
SPEC_HASH_ANNOTATION = "kfdist.dev/spec-hash"
_CREATE_ATTEMPTS = 3


class JobNameConflictError(KfdistError):
    """A job with the step's name exists but was not created by this step."""


@dataclasses.dataclass
class JobClaim:
    """What the step may clean up (mutable: it changes as the job is created and deleted).

    Attributes:
      uid: The uid of the job known to be the step's own.
      maybe_created: A create was sent whose outcome is unknown (e.g. the
        connection dropped): clean-up must look before it deletes.
    """

    uid: Optional[str] = None
    maybe_created: bool = False


def spec_hash(job: RenderedJob) -> str:
    """Digest of what makes the job this step's: kind, name, namespace, labels and spec."""
    metadata = job.body.get("metadata") or {}
    identity = {"apiVersion": job.kind.api_version, "kind": job.kind.kind, "name": job.name,
                "namespace": job.namespace, "labels": metadata.get("labels") or {},
                "spec": job.body.get("spec")}
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]


def prepare_body(job: RenderedJob, owner: Optional[OwnerRef]) -> Dict[str, Any]:
    """The object to create: a copy of `job.body` with the spec-hash annotation and,
    when `owner` shares the job's namespace, an ownerReference to it."""
    body = copy.deepcopy(job.body)
    metadata = body.setdefault("metadata", {})
    metadata["name"], metadata["namespace"] = job.name, job.namespace
    metadata.setdefault("annotations", {})[SPEC_HASH_ANNOTATION] = spec_hash(job)
    if owner is not None and owner.namespace == job.namespace:
        references = metadata.setdefault("ownerReferences", [])
        if all(r.get("uid") != owner.uid for r in references):
            references.append(owner.to_body())
    return body


def create_or_adopt(api, job: RenderedJob, owner: Optional[OwnerRef], claim: JobClaim,
                    retry: RetryPolicy, log: Callable[[str], None]) -> Tuple[Dict[str, Any], bool]:
    """Creates the job, or adopts this step's existing one.

    Args:
      api: A `KubeApi`.
      job: The rendered job.
      owner: The step's pod, added to the ownerReferences.
      claim: Updated as the job becomes the step's (for clean-up on any exit).
      retry: Retry policy for API failures.
      log: Receives progress lines.

    Returns:
      The job as the server returned it, and whether it was adopted.

    Raises:
      JobNameConflictError: The name belongs to a job this step did not create.
      KubeApiError: The API refused (CRD missing, RBAC) or stayed unreachable.
    """
    what = f"{job.kind.kind} {job.namespace}/{job.name}"
    body = prepare_body(job, owner)
    for _ in range(_CREATE_ATTEMPTS):
        claim.maybe_created = True
        try:
            created = call_with_retry(retry, api.create_job, job.kind, job.namespace, body, log=log)
            claim.uid = created["metadata"]["uid"]
            log(f"Created {what} (uid {claim.uid})")
            return created, False
        except AlreadyExistsError:
            pass
        except KubeApiError as error:
            claim.maybe_created = isinstance(error, TransientApiError)
            raise
        try:
            existing = call_with_retry(retry, api.get_job, job.kind, job.namespace, job.name,
                                       log=log)
        except NotFoundError:
            continue  # deleted in between: create again
        _require_ours(job, existing, claim)
        claim.uid = existing["metadata"]["uid"]
        condition = js.terminal_condition(existing)
        if js.is_being_deleted(existing) or (condition is not None and condition.type == js.FAILED):
            state = "failed" if condition is not None else "is being deleted"
            log(f"{what} from an earlier attempt {state}: deleting it and starting again")
            delete_claimed(api, job, claim, log)
            continue
        log(f"Re-attaching to {what} (uid {claim.uid}), created by an earlier attempt of this step")
        return _add_owner(api, job, existing, owner, retry, log), True
    raise KfdistError(f"could not create {what}: it kept re-appearing")


def delete_claimed(api, job: RenderedJob, claim: JobClaim, log: Callable[[str], None]) -> None:
    """Deletes the step's job, if there may be one, and waits until it is gone."""
    if claim.uid is None and not claim.maybe_created:
        return
    delete_job_and_wait(api, job, claim.uid, log, SPEC_HASH_ANNOTATION, spec_hash(job))
    claim.uid, claim.maybe_created = None, False


def _require_ours(job: RenderedJob, existing: Dict[str, Any], claim: JobClaim) -> None:
    ours = spec_hash(job)
    theirs = ((existing.get("metadata") or {}).get("annotations") or {}).get(SPEC_HASH_ANNOTATION)
    if theirs == ours:
        return
    claim.maybe_created = False
    found = (f"{SPEC_HASH_ANNOTATION}={theirs}" if theirs
             else f"no {SPEC_HASH_ANNOTATION} annotation")
    raise JobNameConflictError(
        f"{job.kind.kind} {job.namespace}/{job.name} already exists and was not created by this "
        f"step ({found}, expected {ours}); kfdist leaves it untouched. Delete it (kubectl delete "
        f"{job.kind.crd_name} {job.name} -n {job.namespace}) or give the job another name.")


def _add_owner(api, job: RenderedJob, existing: Dict[str, Any], owner: Optional[OwnerRef],
               retry: RetryPolicy, log: Callable[[str], None]) -> Dict[str, Any]:
    """Adds the step's pod to the ownerReferences, so GC keeps the job while this attempt runs."""
    if owner is None or owner.namespace != job.namespace:
        return existing
    references = existing["metadata"].get("ownerReferences") or []
    if any(r.get("uid") == owner.uid for r in references):
        return existing
    try:
        return call_with_retry(retry, api.patch_job_metadata, job.kind, job.namespace, job.name,
                               {"ownerReferences": references + [owner.to_body()]})
    except KubeApiError as error:
        log(f"Could not add this step's pod as an owner of {job.kind.kind} {job.name}: {error}")
        return existing
